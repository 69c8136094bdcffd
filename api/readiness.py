"""Whether this node is ready to serve, asked by ``/readyz`` (the probe) and by ``/metrics``
(``segmentstore_node_ready``, for the alert): one answer for both. And, apart from it, whether
the node takes writes (``/healthz``'s ``writable``, ``segmentstore_node_writable``).

Ready means the node can serve *reads* of everything it holds: a single node once every
container runs or is read-only (Tier 1 full: reads are served, changes answered 507); a
cluster node once it has joined, holds its own lease and sees the others', and every container
it holds runs or is read-only. A read-only node stays ready, so that a load balancer keeps
sending it the reads it can serve; that it cannot take writes is said by ``writable``. The
containers others hold are theirs to report.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from segmentstore.api.schemas import public_status
from segmentstore.cluster.membership import ClusterMembership
from segmentstore.containers.container import SegmentContainer
from segmentstore.store import SegmentStore

_READABLE = ("running", "read_only")


@dataclass(frozen=True)
class Readiness:
    ready: bool
    why: str = ""  # when not ready
    waiting: list[SegmentContainer] = field(default_factory=list)  # held, not serving reads


def _held(store: SegmentStore) -> list[SegmentContainer]:
    return [c for c in store.containers if c.id in store.owned]


def readiness(store: SegmentStore, cluster: ClusterMembership | None) -> Readiness:
    waiting = [c for c in _held(store) if public_status(c) not in _READABLE]
    if cluster is not None:
        if cluster.ready():
            return Readiness(True)
        if cluster.leaving:
            why = "this node is leaving the cluster"
        elif not cluster.joined:
            why = "this node has not joined the cluster yet"
        elif not cluster.sees_the_cluster():
            why = (
                "this node cannot write its lease in the cluster's lease bucket (out of reach,"
                " or lost and not made again yet), so it holds none"
            )
        else:
            why = "this node is still recovering containers it holds"
        return Readiness(False, why, waiting)
    if not store.containers or waiting:
        return Readiness(False, "not every container serves reads", waiting)
    return Readiness(True)


def read_only_containers(store: SegmentStore) -> list[SegmentContainer]:
    """The containers this node holds that serve reads but refuse changes (Tier 1 full)."""
    return [c for c in _held(store) if public_status(c) == "read_only"]


def writable(store: SegmentStore, cluster: ClusterMembership | None) -> bool:
    """Whether the node takes writes: ready, and no container it holds is read-only."""
    return readiness(store, cluster).ready and not read_only_containers(store)
