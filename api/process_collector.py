"""What ``prometheus_client``'s process collector leaves out and a long run must watch: the
process's threads and open sockets (with ``process_open_fds`` and
``process_resident_memory_bytes``, these are the figures that must stay flat for hours; the
drill samples them). Linux only, read from ``/proc/self``; elsewhere nothing is exported."""

from __future__ import annotations

import os
from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

_PROC = "/proc/self"


class ProcessExtrasCollector(Collector):
    def collect(self) -> Iterator[Metric]:
        if not os.path.isdir(_PROC):
            return
        threads = _threads()
        if threads is not None:
            yield GaugeMetricFamily(
                "segmentstore_process_threads", "threads of this process", threads
            )
        yield GaugeMetricFamily(
            "segmentstore_process_open_sockets",
            "sockets this process holds open: its connections and listeners",
            _sockets(),
        )


def _threads() -> int | None:
    try:
        with open(f"{_PROC}/status") as status:
            for line in status:
                if line.startswith("Threads:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _sockets() -> int:
    count = 0
    try:
        descriptors = os.listdir(f"{_PROC}/fd")
    except OSError:
        return 0
    for fd in descriptors:
        try:
            if os.readlink(f"{_PROC}/fd/{fd}").startswith("socket:"):
                count += 1
        except OSError:
            continue  # closed meanwhile
    return count
