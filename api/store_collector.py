"""The store's figures for ``/metrics``, read when Prometheus scrapes and at no other time.

Per container this node holds: its status (one series per status, ``1`` for the current one),
epoch, segments, Tier 1 bytes, bytes not yet in Tier 2, last operation sequence and retention
figures; for the cache: bytes in use, capacity and evictions. A single node holds every
container; in a cluster a container's series move with it, so the node that reports them (the
scrape's ``instance``) is its owner, and no container is reported twice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from segmentstore.api.schemas import PUBLIC_STATUSES, public_status
from segmentstore.containers.container import SegmentContainer
from segmentstore.store import SegmentStore

# name (after segmentstore_container_), help, value
_GAUGES: tuple[tuple[str, str, Callable[[SegmentContainer], float]], ...] = (
    ("epoch", "the container's epoch", lambda c: c.epoch),
    ("segments", "segments held, active or not", lambda c: c.segment_count),
    ("active_segments", "segments in memory", lambda c: c.active_segment_count),
    ("tier1_bytes", "bytes in Tier 1", lambda c: c.tier1_bytes),
    ("tier2_lag_bytes", "bytes not yet in Tier 2", lambda c: c.tier2_lag_bytes),
    ("last_sequence", "the last operation's sequence number", lambda c: c.last_sequence),
    (
        "tier2_retrying",
        "1 while a Tier 2 failure is being retried",
        lambda c: c.tier2_error is not None,
    ),
    (
        "retention_lag_seconds",
        "how long ago the oldest stored append should have expired (time retention)",
        lambda c: c.retention_lag_ms / 1000,
    ),
)
_COUNTERS: tuple[tuple[str, str, Callable[[SegmentContainer], float]], ...] = (
    (
        "retention_truncated_bytes",
        "bytes truncated by retention policies",
        lambda c: c.retention_truncated_bytes,
    ),
    (
        "recoveries",
        "recoveries the store started by itself after a fault",
        lambda c: c.auto_recoveries,
    ),
    (
        "tier2_corrupted_reads",
        "Tier 2 reads refused because their bytes failed their checksum (data_corrupted)",
        lambda c: c.corrupted_reads,
    ),
)


class StoreCollector(Collector):
    def __init__(self, store: SegmentStore) -> None:
        self.store = store

    def collect(self) -> Iterator[Metric]:
        containers = [c for c in self.store.containers if c.id in self.store.owned]
        status = GaugeMetricFamily(
            "segmentstore_container_status",
            "1 for the container's status (running, recovering, read_only, offline), else 0",
            labels=["container", "status"],
        )
        for c in containers:
            now = public_status(c)
            for name in PUBLIC_STATUSES:
                status.add_metric([str(c.id), name], int(name == now))
        yield status
        for suffix, help_text, value in _GAUGES:
            gauge = GaugeMetricFamily(
                f"segmentstore_container_{suffix}", help_text, labels=["container"]
            )
            for c in containers:
                gauge.add_metric([str(c.id)], value(c))
            yield gauge
        for suffix, help_text, value in _COUNTERS:
            counter = CounterMetricFamily(
                f"segmentstore_container_{suffix}", help_text, labels=["container"]
            )
            for c in containers:
                counter.add_metric([str(c.id)], value(c))
            yield counter
        yield from self._cache()

    def _cache(self) -> Iterator[Metric]:
        if not hasattr(self.store, "cache_manager"):
            return  # not started yet
        stats = self.store.cache_manager.stats
        yield GaugeMetricFamily(
            "segmentstore_cache_used_bytes", "cache bytes in use", stats.used_bytes
        )
        yield GaugeMetricFamily("segmentstore_cache_max_bytes", "cache capacity", stats.max_bytes)
        yield CounterMetricFamily(
            "segmentstore_cache_evictions", "cache evictions", stats.evictions
        )
