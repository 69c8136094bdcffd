"""Whether this node is ready to serve, asked by ``/readyz`` (the probe) and by ``/metrics``
(``segmentstore_node_ready``, for the alert): one answer for both. And, apart from it, whether
the node takes writes (``/healthz``'s ``writable``, ``segmentstore_node_writable``).

Ready means the node can serve *reads* of everything it holds: a single node once every
container runs or is read-only (Tier 1 full: reads are served, changes answered 507); a
cluster node once it has joined, holds its own lease and sees the others', and every container
it holds runs or is read-only. A read-only node stays ready, so that a load balancer keeps
sending it the reads it can serve; that it cannot take writes is said by ``writable``. The
containers others hold are theirs to report.

A worker of a node of several answers for the whole node: it is ready once it is, and every
other worker says on the board that it is too (:mod:`segmentstore.workers.board`); it takes
writes once none of the node's containers is read-only, its siblings' as the board shows them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from segmentstore.api.schemas import public_status
from segmentstore.cluster.membership import ClusterMembership
from segmentstore.cluster.ownership import ContainerOwnership
from segmentstore.containers.container import SegmentContainer
from segmentstore.containers.status import ContainerStatus
from segmentstore.store import SegmentStore
from segmentstore.workers.place import WorkerPlace
from segmentstore.workers.share import worker_of

_READABLE = ("running", "read_only")


@dataclass(frozen=True)
class Readiness:
    ready: bool
    why: str = ""  # when not ready
    waiting: list[SegmentContainer] = field(default_factory=list)  # held, not serving reads


def _held(store: SegmentStore) -> list[SegmentContainer]:
    return [c for c in store.containers if c.id in store.owned]


def readiness(
    store: SegmentStore, cluster: ContainerOwnership | None, worker: WorkerPlace | None = None
) -> Readiness:
    """Whether this process is ready; with ``worker``, whether the whole node is."""
    own = _own_readiness(store, cluster)
    if worker is None or not own.ready:
        return own
    waiting = [
        f"w{i}" for i in range(worker.count) if i != worker.index and not worker.board.ready(i)
    ]
    if waiting:
        return Readiness(
            False,
            f"worker {', '.join(waiting)} of this node is not ready yet (starting, recovering its"
            " containers, or started again after it died)",
        )
    return own


def _own_readiness(store: SegmentStore, cluster: ContainerOwnership | None) -> Readiness:
    waiting = [c for c in _held(store) if public_status(c) not in _READABLE]
    if cluster is not None:
        if cluster.ready():
            return Readiness(True)
        return Readiness(False, _why_not_ready(cluster), waiting)
    if not store.containers or waiting:
        return Readiness(False, "not every container serves reads", waiting)
    return Readiness(True)


def _why_not_ready(cluster: ContainerOwnership) -> str:
    if cluster.leaving:
        return "this node is leaving the cluster"
    if isinstance(cluster, ClusterMembership):
        if not cluster.joined:
            return "this node has not joined the cluster yet"
        if not cluster.sees_the_cluster():
            return (
                "this node cannot write its lease in the cluster's lease bucket (out of reach,"
                " or lost and not made again yet), so it holds none"
            )
    return "this node is still recovering containers it holds"


def read_only_containers(store: SegmentStore, worker: WorkerPlace | None = None) -> list[int]:
    """The ids of the containers this node holds that serve reads but refuse changes (Tier 1
    full); with ``worker`` on a single node, those of its siblings too, as the board shows
    them (in a cluster each worker is a member of its own, and holds what its leases say)."""
    ids = [c.id for c in _held(store) if public_status(c) == "read_only"]
    if worker is not None and not store.settings.cluster.enabled:
        count = store.settings.store.containers
        ids += [
            c
            for c in range(count)
            if worker_of(c, worker.count) != worker.index
            and worker.board.container(c)[1] is ContainerStatus.READ_ONLY
        ]
    return sorted(ids)


def writable(
    store: SegmentStore, cluster: ContainerOwnership | None, worker: WorkerPlace | None = None
) -> bool:
    """Whether the node takes writes: ready, and no container it holds is read-only."""
    return readiness(store, cluster, worker).ready and not read_only_containers(store, worker)
