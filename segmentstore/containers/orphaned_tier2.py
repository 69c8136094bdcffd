"""A data directory without its Tier 1, whole or in part: the Tier 1 that knew the segments
was lost (a deleted volume, a deleted container directory, a new node over old storage).

* A data directory that never held data (no ``store.json``) over an empty Tier 2 is new and
  simply starts. Over a Tier 2 that already holds segments, it is a node whose Tier 1 is gone.
* A data directory with ``store.json`` held a Tier 1 directory for every container (the
  identity is written only after them): one that is missing was lost, whatever Tier 2 holds,
  since what it had not yet moved to Tier 2 is gone with it.

By default the store refuses to start over such a loss: starting would show no segments (or
fewer) and let a new segment of an old name take appends that Tier 2 refuses for good. With
``store.rebuild_from_tier2`` it rebuilds each container's Tier 1 that is empty from the
manifests instead (:mod:`.tier2_rebuild`; a container whose log is there is kept as it is),
names what was lost (:mod:`.rebuild_report`), and starts over the rebuilt logs.

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
from segmentstore.contracts.errors import InvalidArgumentError
from segmentstore.data_dir import (
    IDENTITY_FILE,
    TIER1_DIR,
    claim_data_dir,
    container_tier1_dir,
    make_directories,
    sync_directory,
)
from segmentstore.settings import Settings
from segmentstore.tier2 import ChunkStorage, SegmentReader, Tier2Error

log = logging.getLogger(__name__)

REBUILDING_FILE = "rebuild.incomplete"


def missing_tier1(data_dir: Path, containers: int) -> list[int]:
    """The containers whose local Tier 1 log is missing from ``data_dir``: every one in a
    directory without an identity or in the middle of a rebuild, else those whose directory
    is gone."""
    if not (data_dir / IDENTITY_FILE).exists() or (data_dir / REBUILDING_FILE).exists():
        return list(range(containers))
    return [c for c in range(containers) if not container_tier1_dir(data_dir, c).is_dir()]


async def adopt_orphaned_tier2(storage: ChunkStorage, settings: Settings) -> None:
    """Refuse to start over a lost Tier 1 (see the module doc), or rebuild it from Tier 2 if
    ``store.rebuild_from_tier2`` says so. A whole data directory, or a new one over an empty
    Tier 2, starts as it is."""
    uri, data_dir = settings.tier2_uri(), settings.store.data_dir
    containers = settings.store.containers
    held = (data_dir / IDENTITY_FILE).exists()
    if held:  # a count that changed is refused as such, not as containers gone missing
        await asyncio.to_thread(claim_data_dir, data_dir, containers)
    missing = await asyncio.to_thread(missing_tier1, data_dir, containers)
    if not missing:
        return
    held = held or (data_dir / REBUILDING_FILE).exists()
    if not held:
        try:
            orphaned = await asyncio.to_thread(SegmentReader(storage).holds_any_segment)
        except Tier2Error as error:
            raise InvalidArgumentError(f"cannot list Tier 2 at {uri}: {error}") from error
        if not orphaned:
            return  # a new data directory over a new Tier 2
    if not settings.store.rebuild_from_tier2:
        raise InvalidArgumentError(_refusal(data_dir, uri, missing, containers, held))
    await asyncio.to_thread(_begin, data_dir, containers)
    local_log = functools.partial(tier1_log, data_dir, settings.tier1, None)
    report = await rebuild_from_tier2(storage, uri, containers, local_log, settings.durable_log)
    report.log_lines()
    path = await asyncio.to_thread(report.write, data_dir)
    await asyncio.to_thread(_finish, data_dir, containers)
    log.warning("the rebuild report is in %s", path)


def _refusal(data_dir: Path, uri: str, missing: list[int], containers: int, held: bool) -> str:
    if not held:
        return (
            f"{data_dir} has no Tier 1, but Tier 2 at {uri} already holds segments:"
            " the Tier 1 that knew them is gone. Refusing to start over them. Start once with"
            " --rebuild-from-tier2 (store.rebuild_from_tier2) to rebuild Tier 1 from Tier 2,"
            " or read them with `segmentstore tier2 ls` and `tier2 cat`, then move them aside"
            " or point tier2.uri at another location."
        )
    if len(missing) == containers:
        which, where = "any of its containers", str(data_dir / TIER1_DIR)
    else:
        which = f"container{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing))}"
        where = ", ".join(str(container_tier1_dir(data_dir, c)) for c in missing)
    return (
        f"{data_dir} has no Tier 1 for {which} (missing: {where}), though it held one:"
        " whatever had not reached Tier 2 yet is gone. Refusing to start without it."
        " Restore it, or start once with --rebuild-from-tier2 (store.rebuild_from_tier2) to"
        f" rebuild what is missing from Tier 2 at {uri} (a container whose Tier 1 is there is"
        " kept as it is)."
    )


def _begin(data_dir: Path, containers: int) -> None:
    if (data_dir / IDENTITY_FILE).exists():
        claim_data_dir(data_dir, containers)  # checks the count before anything is written
    make_directories(data_dir)
    _write_durably(data_dir / REBUILDING_FILE)


def _finish(data_dir: Path, containers: int) -> None:
    claim_data_dir(data_dir, containers)
    (data_dir / REBUILDING_FILE).unlink()
    sync_directory(data_dir)


def _write_durably(path: Path) -> None:
    with open(path, "wb") as f:
        os.fsync(f.fileno())
    sync_directory(path.parent)
