"""Which worker of a node owns which container, and the names workers go by.

A container belongs to worker ``container % workers`` for the life of the node: shares are
fixed, so no worker ever needs to ask another what it holds, and each container's Tier 1 lock
is taken by one process only. A worker is named ``NODE/wI`` wherever a node id appears
(``GET /v1/cluster``, a cluster's leases, the logs and the metrics' ``worker`` label).
"""

from __future__ import annotations

import re

_WORKER_ID = re.compile(r"^(?P<node>.+)/w(?P<index>[0-9]{1,3})$")


def worker_of(container: int, workers: int) -> int:
    """The worker that owns ``container`` on a single node of ``workers`` workers."""
    return container % workers


def share_of(worker: int, workers: int, containers: int) -> frozenset[int]:
    """The containers worker ``worker`` owns on a single node."""
    return frozenset(range(worker, containers, workers))


def worker_name(index: int) -> str:
    """``wI``: the ``worker`` label of the logs and metrics."""
    return f"w{index}"


def worker_id(node_id: str, index: int) -> str:
    """The id of worker ``index`` of node ``node_id``: ``NODE/wI``."""
    return f"{node_id}/{worker_name(index)}"


def parse_worker_id(member: str) -> tuple[str, int] | None:
    """(node id, worker index) of a ``NODE/wI`` id; None for a node of one process."""
    found = _WORKER_ID.match(member)
    return None if found is None else (found.group("node"), int(found.group("index")))
