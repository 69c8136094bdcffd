"""The ids of a deployment's members, as ``GET /v1/cluster`` names them: a node of one process
is its node id; each worker of a node of several (``serve --workers N``) is ``NODE/wI``."""

from __future__ import annotations

import re

_WORKER_ID = re.compile(r"^(?P<node>.+)/w(?P<index>[0-9]{1,3})$")


def worker_name(index: int) -> str:
    """``wI``: a worker's name (the ``worker`` label of the logs and metrics)."""
    return f"w{index}"


def worker_id(node_id: str, index: int) -> str:
    """The member id of worker ``index`` of node ``node_id``: ``NODE/wI``."""
    return f"{node_id}/{worker_name(index)}"


def parse_worker_id(member: str) -> tuple[str, int] | None:
    """(node id, worker index) of a ``NODE/wI`` id; None for a node of one process."""
    found = _WORKER_ID.match(member)
    return None if found is None else (found.group("node"), int(found.group("index")))


def node_of(member: str) -> str:
    """The node a member runs on: itself, or the node of a worker."""
    worker = parse_worker_id(member)
    return member if worker is None else worker[0]
