"""Listing segment names by prefix over the containers a process holds: the active ones from
memory, the inactive ones from Tier 2's manifests, whose keys sort and select by prefix as the
names do (:mod:`segmentstore.tier2.layout`), so only as many of those are read as a page needs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence, Set

from segmentstore.containers.container import SegmentContainer
from segmentstore.containers.status import ContainerStatus
from segmentstore.contracts.errors import ContainerUnavailableError
from segmentstore.reading.tier2_reads import Tier2Reads
from segmentstore.tier2 import Tier2Error

_SERVING_READS = (ContainerStatus.RUNNING, ContainerStatus.READ_ONLY)


async def list_names(
    containers: Sequence[SegmentContainer],
    owned: Set[int],
    container_for: Callable[[str], SegmentContainer],
    tier2: Tier2Reads,
    *,
    prefix: str,
    after: str | None,
    limit: int | None,
    shared_out: bool,
) -> list[str]:
    """The names of the ``owned`` containers' segments that start with ``prefix``, sorted by
    code point, after ``after``, at most ``limit`` (None: all). ``container_for`` routes a
    name to its container. ``shared_out``: this process holds only some of the store's
    containers (a cluster, or a worker of a node); every one it holds must then be serving
    reads, since a page missing a recovering container's names would be wrong."""

    def stored_names() -> list[str]:
        """The inactive segments' names from Tier 2 that this process serves: at least
        ``limit`` of them (all if None), in order, reading Tier 2 a page at a time. Tier 2
        still names segments whose delete (or merge) has not reached it yet: those are left
        out."""
        found: list[str] = []
        batch = None if limit is None else max(limit, 100)
        cursor = after
        while True:
            page = tier2.list_names(prefix, cursor, batch)
            for name in page:
                container = container_for(name)
                if container.id in owned and not container.removal_pending(name):
                    found.append(name)
            if batch is None or len(page) < batch or limit is None or len(found) >= limit:
                return found
            cursor = page[-1]

    held = [c for c in containers if c.id in owned]
    for c in held:
        if shared_out and c.status not in _SERVING_READS:
            raise ContainerUnavailableError(c.id, c.failure or c.status.value)
    names = {n for c in held for n in c.active_names(prefix) if after is None or n > after}
    if all(c.segment_count <= c.active_segment_count for c in held):
        # Every segment is in memory: Tier 2 can name no other.
        listed = sorted(names)
        return listed if limit is None else listed[:limit]
    try:
        names.update(await asyncio.to_thread(stored_names))
    except Tier2Error as error:
        raise ContainerUnavailableError(
            held[0].id if held else 0, f"cannot list Tier 2: {error}"
        ) from error
    listed = sorted(names)
    return listed if limit is None else listed[:limit]
