"""Which worker of a node owns which container.

A container belongs to worker ``container % workers`` for the life of the node: shares are
fixed, so no worker ever needs to ask another what it holds, and each container's Tier 1 lock
is taken by one process only. A worker is named ``NODE/wI`` wherever a node id appears
(``GET /v1/cluster``, a cluster's leases, the logs and the metrics' ``worker`` label): the
names are the contract's (:mod:`segmentstore.contracts.members`).
"""

from __future__ import annotations


def worker_of(container: int, workers: int) -> int:
    """The worker that owns ``container`` on a single node of ``workers`` workers."""
    return container % workers


def share_of(worker: int, workers: int, containers: int) -> frozenset[int]:
    """The containers worker ``worker`` owns on a single node."""
    return frozenset(range(worker, containers, workers))
