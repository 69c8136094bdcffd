"""The node's own figures for ``/metrics``, read when Prometheus scrapes: whether it is ready
(as ``/readyz`` says) and the room on the local file systems its tiers write to.

- ``segmentstore_node_ready``: 1 while ``/readyz`` would answer 200;
- ``segmentstore_filesystem_avail_bytes`` and ``segmentstore_filesystem_size_bytes``, per
  ``tier`` (``tier1`` for the local write-ahead log, ``tier2`` for a ``file://`` Tier 2), and
  ``segmentstore_filesystem_read_only`` (1 when that file system is mounted read-only).
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from segmentstore.api.readiness import readiness
from segmentstore.cluster.ownership import ContainerOwnership
from segmentstore.containers.disk_space import disk_space, local_tier_directories
from segmentstore.store import SegmentStore
from segmentstore.workers.place import WorkerPlace


class NodeCollector(Collector):
    def __init__(
        self,
        store: SegmentStore,
        cluster: ContainerOwnership | None,
        worker: WorkerPlace | None = None,
    ) -> None:
        self.store = store
        self.cluster = cluster
        self.worker = worker
        self.directories = local_tier_directories(store.settings)

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "segmentstore_node_ready",
            "1 while the node is ready (/readyz answers 200), else 0",
            int(readiness(self.store, self.cluster, self.worker).ready),
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
