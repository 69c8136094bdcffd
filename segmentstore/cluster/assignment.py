"""Which live node should own each container: balanced, and moving as few as it can.

Every node computes the same answer from the same view (the live nodes and who holds what),
with no messages between them. Shares are even: each node gets ``containers // nodes``, and
``containers % nodes`` of them one more. The nodes holding most now get the extra ones, and
every node keeps what it holds up to its share, the containers it ranks highest first; only
the rest move. So a node that dies moves only its own containers, and a node that joins or
comes back takes only its share, from the nodes that hold more than theirs.

Containers without an owner go, in order, to the best-ranked node that still has room, where
each container ranks the nodes by a hash of (container, node) (rendezvous hashing): a fresh
cluster spreads them evenly, and a node tends to get back the containers it held before.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Mapping


def _rank(container: int, node: str) -> bytes:
    return hashlib.blake2b(f"{container}/{node}".encode(), digest_size=8).digest()


def assign(
    containers: int, nodes: Iterable[str], held: Mapping[int, str] | None = None
) -> dict[int, str]:
    """container -> node for ``containers`` containers over ``nodes`` (empty if no nodes),
    given ``held``: container -> the node that holds it now."""
    live = sorted(set(nodes))
    if not live:
        return {}
    kept = {c: n for c, n in (held or {}).items() if n in live and 0 <= c < containers}
    holding = Counter(kept.values())
    base, extra = divmod(containers, len(live))
    by_holding = sorted(live, key=lambda node: (-holding[node], node))
    room = {node: base + (1 if i < extra else 0) for i, node in enumerate(by_holding)}
    owners: dict[int, str] = {}
    for node in live:
        mine = sorted(
            (c for c, holder in kept.items() if holder == node),
            key=lambda c: _rank(c, node),
            reverse=True,
        )
        for container in mine[: room[node]]:
            owners[container] = node
        room[node] -= min(len(mine), room[node])
    for container in range(containers):
        if container in owners:
            continue
        ranked = sorted(live, key=lambda node: _rank(container, node), reverse=True)
        owner = next(node for node in ranked if room[node] > 0)
        room[owner] -= 1
        owners[container] = owner
    return owners
