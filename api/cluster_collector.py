"""A cluster node's figures for ``/metrics``: who it sees, what it holds, what nobody holds,
what moved, how many requests it passed on to other nodes (and refused at a peer's cap), and
how many streams and consumers the deployment has in JetStream (flat in a healthy cluster:
one lease watcher per node, and a short-lived reader per container recovery)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from segmentstore.cluster.membership import ClusterMembership

if TYPE_CHECKING:
    from segmentstore.api.forwarding import ForwardingSession


class ClusterCollector(Collector):
    def __init__(self, membership: ClusterMembership, forwarding: ForwardingSession) -> None:
        self.membership = membership
        self.forwarding = forwarding

    def collect(self) -> Iterator[Metric]:
        described = self.membership.describe()
        moves = self.membership.moves
        yield GaugeMetricFamily(
            "segmentstore_cluster_nodes", "live nodes this node sees", len(described["nodes"])
        )
        yield GaugeMetricFamily(
            "segmentstore_cluster_containers_held",
            "containers this node holds",
            sum(1 for c in described["containers"] if c["owner"] == self.membership.node_id),
        )
        yield GaugeMetricFamily(
            "segmentstore_cluster_containers_unowned",
            "containers no live node holds, as this node sees it (moving, or nobody takes them)",
            sum(1 for c in described["containers"] if c["owner"] is None),
        )
        counter = CounterMetricFamily(
            "segmentstore_cluster_container_moves",
            "containers this node took, handed over, or lost (lease lost or fenced)",
            labels=["kind"],
        )
        for kind in ("taken", "handed_over", "lost"):
            counter.add_metric([kind], moves[kind])
        yield counter
        yield CounterMetricFamily(
            "segmentstore_cluster_forwarded_requests",
            "requests passed on to the node that holds their container",
            self.forwarding.forwarded,
        )
        yield CounterMetricFamily(
            "segmentstore_cluster_forwards_refused",
            "requests refused with 503 because as many as allowed were under way to their owner",
            self.forwarding.refused_busy,
        )
        usage = self.membership.jetstream_usage
        if usage is not None:
            yield GaugeMetricFamily(
                "segmentstore_cluster_jetstream_streams",
                "streams of this deployment in JetStream, as last counted",
                usage.streams,
            )
            yield GaugeMetricFamily(
                "segmentstore_cluster_jetstream_consumers",
                "consumers of this deployment's streams in JetStream, as last counted",
                usage.consumers,
            )
            yield GaugeMetricFamily(
                "segmentstore_cluster_jetstream_replicas_missing",
                "replicas of this deployment's streams out of service (offline, behind their"
                " leader, or a leader missing), as last counted",
                usage.replicas_missing,
            )
