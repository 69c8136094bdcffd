"""A new data directory over a Tier 2 that already holds segments is refused: the Tier 1 that
knew them was lost (a deleted volume, a new node over old storage)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from segmentstore.data_dir import IDENTITY_FILE
from segmentstore.errors import InvalidArgumentError
from segmentstore.tier2 import ChunkStorage, SegmentReader, Tier2Error


def is_new_data_dir(data_dir: Path) -> bool:
    return not (data_dir / IDENTITY_FILE).exists()


async def refuse_orphaned_tier2(storage: ChunkStorage, uri: str, data_dir: Path) -> None:
    """Starting would show no segments and let a new segment of an old name take appends that
    Tier 2 refuses for good, so refuse, and say what to do."""
    try:
        orphaned = await asyncio.to_thread(SegmentReader(storage).holds_any_segment)
    except Tier2Error as error:
        raise InvalidArgumentError(f"cannot list Tier 2 at {uri}: {error}") from error
    if orphaned:
        raise InvalidArgumentError(
            f"{data_dir} is a new data directory, but Tier 2 at {uri} already holds segments:"
            " the Tier 1 that knew them is gone. Refusing to start over them. Read them with"
            " `segmentstore tier2 ls` and `tier2 cat`, then move them aside or point tier2.uri"
            " at another location."
        )
