"""What a long drill watches beside the data: the nodes' descriptors, threads, memory and
sockets, and the deployment's JetStream streams and consumers, sampled through the run from
each node's ``/metrics``. Anything a node creates per request or per tick and never frees
shows here as a figure that keeps growing, long before it stops the node.

A *series* is one figure of one process (a node restarted by a fault starts new ones; each
worker of a node of several is a process of its own, ``NODE/wI``, its figures labelled with
its ``worker``) or, for JetStream, of the deployment. :func:`growing` judges a series: after
its first quarter (start up, caches filling), its medians per quarter rise each time, and in
all by more than the figure's allowance. A figure that grows and then levels off (a cache
reaching its bound) passes; one that keeps climbing fails the drill.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

# metric -> the name it has in a sample
FIGURES = {
    "process_open_fds": "fds",
    "segmentstore_process_threads": "threads",
    "process_resident_memory_bytes": "rss_bytes",
    "segmentstore_process_open_sockets": "sockets",
}
DEPLOYMENT_FIGURES = {
    "segmentstore_cluster_jetstream_streams": "jetstream_streams",
    "segmentstore_cluster_jetstream_consumers": "jetstream_consumers",
}
_START_TIME = "process_start_time_seconds"
# figure -> (growth allowed in all, growth allowed as a part of the second quarter's median)
ALLOWANCE = {
    "fds": (32, 0.25),
    "threads": (8, 0.25),
    "rss_bytes": (256 << 20, 0.5),
    "sockets": (32, 0.25),
    "jetstream_streams": (4, 0.5),
    "jetstream_consumers": (32, 1.0),
}
_MIN_SAMPLES = 8  # a series shorter than this is not judged


@dataclass
class Sample:
    at_s: float
    # node -> figure -> value; a node's figures also carry its process start time ("started")
    nodes: dict[str, dict[str, float]] = field(default_factory=dict)
    deployment: dict[str, float] = field(default_factory=dict)


@dataclass
class Trend:
    series: str  # e.g. "n1 (started 12.3 s) fds", "deployment jetstream_consumers"
    first: float
    last: float
    samples: int
    growing: bool


class ResourceSampler:
    """Samples every node that ``urls`` names, every ``interval_s``, until stopped."""

    def __init__(self, urls: Callable[[], dict[str, str]], interval_s: float) -> None:
        self._urls = urls  # node name -> URL of every node that answers now
        self.interval_s = interval_s
        self.samples: list[Sample] = []
        self._task: asyncio.Task[None] | None = None
        self._started = time.monotonic()

    def start(self) -> None:
        self._started = time.monotonic()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="resources")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        async with httpx.AsyncClient(timeout=10) as http:
            while True:
                self.samples.append(await self.sample(http))
                await asyncio.sleep(self.interval_s)

    async def sample(self, http: httpx.AsyncClient) -> Sample:
        taken = Sample(round(time.monotonic() - self._started, 1))
        for node, url in sorted(self._urls().items()):
            try:
                answer = await http.get(f"{url}/metrics")
            except httpx.HTTPError:
                continue  # down for a fault: its series goes on when it is back
            if answer.status_code != 200:
                continue
            for worker, values in parse_processes(answer.text).items():
                figures = {FIGURES[k]: v for k, v in values.items() if k in FIGURES}
                if _START_TIME in values:
                    figures["started"] = values[_START_TIME]
                taken.nodes[node if worker is None else f"{node}/{worker}"] = figures
                for metric, name in DEPLOYMENT_FIGURES.items():
                    if metric in values:  # every node counts the same deployment: the largest
                        value = max(taken.deployment.get(name, 0), values[metric])
                        taken.deployment[name] = value
        return taken

    def trends(self) -> list[Trend]:
        """Every series of the run, judged."""
        series: dict[str, list[float]] = {}
        for sample in self.samples:
            for node, figures in sample.nodes.items():
                incarnation = f"{node} (pid start {figures.get('started', 0):.0f})"
                for name, value in figures.items():
                    if name != "started":
                        series.setdefault(f"{incarnation} {name}", []).append(value)
            for name, value in sample.deployment.items():
                series.setdefault(f"deployment {name}", []).append(value)
        trends = []
        for key, values in series.items():
            figure = key.rsplit(" ", 1)[1]
            trends.append(Trend(key, values[0], values[-1], len(values), growing(values, figure)))
        return trends

    def to_json(self) -> dict[str, Any]:
        return {
            "interval_s": self.interval_s,
            "samples": [
                {"at_s": s.at_s, "nodes": s.nodes, "deployment": s.deployment} for s in self.samples
            ],
            "trends": [t.__dict__ for t in self.trends()],
        }


def growing(values: list[float], figure: str) -> bool:
    """Whether ``values`` (one series, in order) keeps growing (module docstring)."""
    if len(values) < _MIN_SAMPLES:
        return False
    quarter = len(values) // 4
    medians = [
        statistics.median(values[i * quarter : (i + 1) * quarter if i < 3 else len(values)])
        for i in range(4)
    ]
    _, second, third, fourth = medians
    absolute, relative = ALLOWANCE.get(figure, (0, 0.5))
    rising = second < third < fourth
    return rising and fourth - second > max(absolute, relative * second)


def parse_metrics(text: str) -> dict[str, float]:
    """Unlabelled samples of a Prometheus text exposition: name -> value."""
    return parse_processes(text).get(None, {})


def parse_processes(text: str) -> dict[str | None, dict[str, float]]:
    """The samples of a Prometheus text exposition that describe a whole process, by process:
    ``None`` for a node of one process (unlabelled samples), else the ``worker`` label of a
    node of several (samples whose only label it is): worker -> name -> value."""
    found: dict[str | None, dict[str, float]] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        series, _, value = line.partition(" ")
        name, brace, labels = series.partition("{")
        worker = None
        if brace:
            key, _, quoted = labels.rstrip("}").partition("=")
            if key != "worker" or "," in quoted:
                continue
            worker = quoted.strip('"')
        try:
            found.setdefault(worker, {})[name] = float(value.split(" ")[0])
        except ValueError:
            continue
    return found
