"""Counters and histograms for the event loop's hot paths, exposed by a scrape-time collector.

``prometheus_client``'s own metrics take a lock on every update (about 3 µs for a request's
counter and histogram here), which the append fast path would pay on every request. Figures
recorded only on the event loop need no lock: a :class:`LoopHistogram` is a list of bucket
counts and a counter a plain number, and :class:`LoopMetricsCollector` turns them into
Prometheus families when ``/metrics`` is scraped. Never update them from another thread.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator, Sequence

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector


class LoopHistogram:
    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)  # the last: above every bound (+Inf)
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.total += value

    def cumulative(self) -> list[tuple[str, float]]:
        buckets, running = [], 0
        for bound, count in zip((*map(str, self.bounds), "+Inf"), self.counts, strict=True):
            running += count
            buckets.append((bound, float(running)))
        return buckets


LabelValues = tuple[str, ...]


class LoopMetricsCollector(Collector):
    """Families built at scrape time from loop-only figures. Each ``add_*`` takes a callable
    that returns the current series as ``{label values: figure}``."""

    def __init__(self) -> None:
        self._families: list[Callable[[], Metric]] = []

    def add_counter(
        self,
        name: str,
        documentation: str,
        labels: Sequence[str],
        series: Callable[[], dict[LabelValues, float]],
    ) -> None:
        def family() -> Metric:
            counter = CounterMetricFamily(name, documentation, labels=labels)
            for values, figure in series().items():
                counter.add_metric(list(values), figure)
            return counter

        self._families.append(family)

    def add_histogram(
        self,
        name: str,
        documentation: str,
        labels: Sequence[str],
        series: Callable[[], dict[LabelValues, LoopHistogram]],
    ) -> None:
        def family() -> Metric:
            histogram = HistogramMetricFamily(name, documentation, labels=labels)
            for values, figure in series().items():
                histogram.add_metric(list(values), figure.cumulative(), figure.total)
            return histogram

        self._families.append(family)

    def collect(self) -> Iterator[Metric]:
        for family in self._families:
            yield family()
