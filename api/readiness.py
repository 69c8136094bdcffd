"""Whether this node is ready to serve, asked by ``/readyz`` (the probe) and by ``/metrics``
(``segmentstore_node_ready``, for the alert): one answer for both.

A single node is ready once every container runs. A cluster node is ready once it has joined
and every container it holds runs; the containers others hold are theirs to report. A worker of
a node of several answers for the whole node: it is ready once it is, and every other worker
says on the board that it is too (:mod:`segmentstore.workers.board`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from segmentstore.api.schemas import public_status
from segmentstore.cluster.ownership import ContainerOwnership
from segmentstore.containers.container import SegmentContainer
from segmentstore.store import SegmentStore
from segmentstore.workers.place import WorkerPlace


@dataclass(frozen=True)
class Readiness:
    ready: bool
    why: str = ""  # when not ready
    waiting: list[SegmentContainer] = field(default_factory=list)  # held, not running


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
    waiting = [c for c in store.containers if c.id in store.owned and public_status(c) != "running"]
    if cluster is not None:
        if cluster.ready():
            return Readiness(True)
        why = (
            "this node has not joined the cluster, or is leaving it, or is still recovering"
            " the containers it holds"
        )
        return Readiness(False, why, waiting)
    if not store.containers or waiting:
        return Readiness(False, "not every container is running", waiting)
    return Readiness(True)
