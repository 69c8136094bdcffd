"""Which live node should own each container: balanced, and stable as nodes come and go.

Every node computes the same answer from the same set of live nodes, with no messages between
them. Each container ranks the nodes by a hash of (container, node), highest first (rendezvous
hashing: a node that joins or leaves changes only the containers it wins or held); then the
containers, in order, take their best-ranked node that still has room, where room is the
container count divided evenly (the first ``count % nodes`` nodes by id may take one more).
So the spread is never off by more than one, and most containers stay where they were.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable


def _rank(container: int, node: str) -> bytes:
    return hashlib.blake2b(f"{container}/{node}".encode(), digest_size=8).digest()


def assign(containers: int, nodes: Iterable[str]) -> dict[int, str]:
    """container -> node for ``containers`` containers over ``nodes`` (empty if no nodes)."""
    live = sorted(set(nodes))
    if not live:
        return {}
    base, extra = divmod(containers, len(live))
    room = {node: base + (1 if i < extra else 0) for i, node in enumerate(live)}
    owners: dict[int, str] = {}
    for container in range(containers):
        ranked = sorted(live, key=lambda node: _rank(container, node), reverse=True)
        owner = next(node for node in ranked if room[node] > 0)
        room[owner] -= 1
        owners[container] = owner
    return owners
