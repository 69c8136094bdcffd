"""Whether this node is ready to serve, asked by ``/readyz`` (the probe) and by ``/metrics``
(``segmentstore_node_ready``, for the alert): one answer for both.

A single node is ready once every container runs. A cluster node is ready once it has joined
and every container it holds runs; the containers others hold are theirs to report.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from segmentstore.api.schemas import public_status
from segmentstore.cluster.membership import ClusterMembership
from segmentstore.containers.container import SegmentContainer
from segmentstore.store import SegmentStore


@dataclass(frozen=True)
class Readiness:
    ready: bool
    why: str = ""  # when not ready
    waiting: list[SegmentContainer] = field(default_factory=list)  # held, not running


def readiness(store: SegmentStore, cluster: ClusterMembership | None) -> Readiness:
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
