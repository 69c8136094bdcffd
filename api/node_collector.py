"""The node's own figures for ``/metrics``, read when Prometheus scrapes: whether it is ready
(as ``/readyz`` says) and the room on the local file systems its tiers write to.

- ``segmentstore_node_ready``: 1 while ``/readyz`` would answer 200 (it serves reads);
- ``segmentstore_node_writable``: 1 while it also takes writes (no container it holds is
  read-only), as ``/healthz``'s ``writable`` says;
- ``segmentstore_filesystem_avail_bytes`` and ``segmentstore_filesystem_size_bytes``, per
  ``tier`` (``tier1`` for the local write-ahead log, ``tier2`` for a ``file://`` Tier 2), and
  ``segmentstore_filesystem_read_only`` (1 when that file system is mounted read-only);
- ``segmentstore_tls_certificate_expiry_timestamp_seconds``, per ``certificate`` the node
  uses (``api``: its HTTPS certificate; ``jetstream_client``, ``jetstream_ca``: those it
  speaks to JetStream with), when it stops being valid (read again when its file changes).
"""

from __future__ import annotations

import logging
import os
import ssl
from collections.abc import Iterator
from pathlib import Path

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from segmentstore.api.readiness import readiness, writable
from segmentstore.cluster.membership import ClusterMembership
from segmentstore.containers.disk_space import disk_space, local_tier_directories
from segmentstore.store import SegmentStore

log = logging.getLogger(__name__)


class NodeCollector(Collector):
    def __init__(self, store: SegmentStore, cluster: ClusterMembership | None) -> None:
        self.store = store
        self.cluster = cluster
        self.directories = local_tier_directories(store.settings)
        jetstream = store.settings.tier1.jetstream
        files = {
            "api": store.settings.api.tls_cert_file,
            "jetstream_client": jetstream.tls_cert_file,
            "jetstream_ca": jetstream.tls_ca_file,
        }
        self.certificates = {name: path for name, path in files.items() if path is not None}
        self._expiries: dict[Path, tuple[float, float | None]] = {}  # path -> (mtime, expiry)

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "segmentstore_node_ready",
            "1 while the node is ready (/readyz answers 200), else 0",
            int(readiness(self.store, self.cluster).ready),
        )
        yield GaugeMetricFamily(
            "segmentstore_node_writable",
            "1 while the node takes writes (ready, and no container it holds is read-only)",
            int(writable(self.store, self.cluster)),
        )
        avail = GaugeMetricFamily(
            "segmentstore_filesystem_avail_bytes",
            "room left for the store on the local file system a tier writes to",
            labels=["tier"],
        )
        size = GaugeMetricFamily(
            "segmentstore_filesystem_size_bytes",
            "size of the local file system a tier writes to",
            labels=["tier"],
        )
        read_only = GaugeMetricFamily(
            "segmentstore_filesystem_read_only",
            "1 when the local file system a tier writes to is mounted read-only",
            labels=["tier"],
        )
        for tier, directory in self.directories.items():
            space = disk_space(directory)
            if space is None:
                continue
            avail.add_metric([tier], space.avail_bytes)
            size.add_metric([tier], space.size_bytes)
            read_only.add_metric([tier], int(space.read_only))
        yield avail
        yield size
        yield read_only
        expiry = GaugeMetricFamily(
            "segmentstore_tls_certificate_expiry_timestamp_seconds",
            "when a certificate the node uses stops being valid (seconds since the epoch)",
            labels=["certificate"],
        )
        for name, path in self.certificates.items():
            when = self._expiry(path)
            if when is not None:
                expiry.add_metric([name], when)
        yield expiry

    def _expiry(self, path: Path) -> float | None:
        """The ``notAfter`` of the first certificate in PEM file ``path``; None if unreadable."""
        try:
            mtime = os.stat(path).st_mtime
        except OSError:
            return None
        known = self._expiries.get(path)
        if known is not None and known[0] == mtime:
            return known[1]
        try:
            # The standard library's own decoder (what ssl.getpeercert() answers with).
            decoded = ssl._ssl._test_decode_cert(str(path))  # type: ignore[attr-defined]
            when: float | None = float(ssl.cert_time_to_seconds(decoded["notAfter"]))
        except (OSError, ValueError, KeyError, ssl.SSLError) as error:
            log.warning("cannot read the expiry of the certificate %s: %s", path, error)
            when = None
        self._expiries[path] = (mtime, when)
        return when
