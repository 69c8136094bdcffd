"""A data directory without its Tier 1 over a Tier 2 that already holds segments: the Tier 1
that knew them was lost (a deleted volume, a new node over old storage).

By default the store refuses to start: starting would show no segments and let a new segment
of an old name take appends that Tier 2 refuses for good. With ``store.rebuild_from_tier2`` it
rebuilds each container's Tier 1 from the manifests instead (:mod:`.tier2_rebuild`), names
what was lost (:mod:`.rebuild_report`), and starts over the rebuilt logs.

A rebuild marks the data directory while it runs, so that one interrupted halfway (some
containers rebuilt, the identity perhaps written) is still seen as Tier 1 lost and run again,
never started as if it were whole.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
from pathlib import Path

from segmentstore.containers.tier1_logs import tier1_log
from segmentstore.containers.tier2_rebuild import rebuild_from_tier2
from segmentstore.data_dir import IDENTITY_FILE, claim_data_dir, sync_directory
from segmentstore.errors import InvalidArgumentError
from segmentstore.settings import Settings
from segmentstore.tier2 import ChunkStorage, SegmentReader, Tier2Error

log = logging.getLogger(__name__)

TIER1_DIR = "tier1"  # the local Tier 1 logs, one directory per container
REBUILDING_FILE = "rebuild.incomplete"


def is_new_data_dir(data_dir: Path) -> bool:
    """Whether ``data_dir`` has no Tier 1 to recover from: no identity, no Tier 1 directory,
    or a rebuild that did not finish."""
    return (
        not (data_dir / IDENTITY_FILE).exists()
        or not (data_dir / TIER1_DIR).is_dir()
        or (data_dir / REBUILDING_FILE).exists()
    )


async def adopt_orphaned_tier2(storage: ChunkStorage, settings: Settings) -> None:
    """Refuse to start over segments that the local Tier 1 does not know, or rebuild it from
    them if ``store.rebuild_from_tier2`` says so. Nothing happens over an empty Tier 2."""
    uri, data_dir = settings.tier2_uri(), settings.store.data_dir
    interrupted = (data_dir / REBUILDING_FILE).exists()
    if not interrupted:
        try:
            orphaned = await asyncio.to_thread(SegmentReader(storage).holds_any_segment)
        except Tier2Error as error:
            raise InvalidArgumentError(f"cannot list Tier 2 at {uri}: {error}") from error
        if not orphaned:
            return
    if not settings.store.rebuild_from_tier2:
        raise InvalidArgumentError(
            f"{data_dir} has no Tier 1, but Tier 2 at {uri} already holds segments:"
            " the Tier 1 that knew them is gone. Refusing to start over them. Start once with"
            " --rebuild-from-tier2 (store.rebuild_from_tier2) to rebuild Tier 1 from Tier 2,"
            " or read them with `segmentstore tier2 ls` and `tier2 cat`, then move them aside"
            " or point tier2.uri at another location."
        )
    await asyncio.to_thread(_begin, data_dir, settings.store.containers)
    local_log = functools.partial(tier1_log, settings, None)
    report = await rebuild_from_tier2(
        storage, uri, settings.store.containers, local_log, settings.durable_log
    )
    report.log_lines()
    path = await asyncio.to_thread(report.write, data_dir)
    await asyncio.to_thread(_finish, data_dir, settings.store.containers)
    log.warning("the rebuild report is in %s", path)


def _begin(data_dir: Path, containers: int) -> None:
    if (data_dir / IDENTITY_FILE).exists():
        claim_data_dir(data_dir, containers)  # checks the count before anything is written
    data_dir.mkdir(parents=True, exist_ok=True)
    _write_durably(data_dir / REBUILDING_FILE)


def _finish(data_dir: Path, containers: int) -> None:
    claim_data_dir(data_dir, containers)
    (data_dir / REBUILDING_FILE).unlink()
    sync_directory(data_dir)


def _write_durably(path: Path) -> None:
    with open(path, "wb") as f:
        os.fsync(f.fileno())
    sync_directory(path.parent)
