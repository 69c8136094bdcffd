"""Rebuilding lost Tier 1 logs from the segment manifests in Tier 2.

When Tier 1 is gone (a deleted volume, a lost disk) but Tier 2 still holds the segments, each
container's log is started anew with one metadata checkpoint made from the manifests of the
segments that map to it: name, segment id (kept: the manifest and the keys of new chunks carry
it), start offset, length = storage length, and the seal. The container then recovers from
that checkpoint like from any other, and its Storage Writer flushes new appends after the
restored length into new chunks. A segment whose manifest is complete (it keeps the segment's
state) is not written into the checkpoint at all: it is an inactive segment, loaded back from
its manifest, state and all, on first use. What Tier 2 does not keep is lost, and the report
names it (:mod:`.rebuild_report`). Every byte adopted is read back and verified against its chunk's
checksums first: a damaged range (a checksum that fails, a chunk short or missing) is
restored as part of the length, so that the segment's offsets stay those its writers were
told, and named in the report; reads of it are refused (``data_corrupted``).

The new log is opened at an epoch above every owner epoch its manifests carry: the manifests
fence any owner below that, so the Storage Writer's first save would otherwise be refused.
A container whose log already holds records is left as it is: its Tier 1 was not lost, or an
interrupted rebuild already wrote its checkpoint.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Callable, Iterable

from segmentstore.containers.rebuild_report import ContainerRebuild, RebuildReport, RebuiltSegment
from segmentstore.contracts.errors import InvalidArgumentError
from segmentstore.contracts.mapping import container_of
from segmentstore.logs.durable_log import DurableLog
from segmentstore.metadata.container_metadata import ContainerMetadata, SegmentMetadata
from segmentstore.settings import DurableLogSettings
from segmentstore.tier1 import DataLogError, DurableDataLog
from segmentstore.tier2 import (
    ChunkCorruptedError,
    ChunkNotFoundError,
    ChunkStorage,
    SegmentManifest,
    SegmentReader,
    Tier2Error,
)

# Bytes read back at a time to verify them.
_VERIFY_PIECE = 8 << 20


def segments_by_container(
    manifests: Iterable[SegmentManifest], containers: int
) -> dict[int, list[SegmentManifest]]:
    """The manifests grouped by the container their name maps to (the store's own mapping)."""
    grouped: dict[int, list[SegmentManifest]] = {}
    for manifest in manifests:
        grouped.setdefault(container_of(manifest.name, containers), []).append(manifest)
    return grouped


def metadata_from_manifests(
    container_id: int, manifests: Iterable[SegmentManifest], now_ms: int
) -> ContainerMetadata:
    """Container metadata that knows exactly what Tier 2 holds of each segment. A segment
    whose manifest is complete stays out of memory (it loads from its manifest, state and
    all, on its first use); one whose manifest is not is active, with what Tier 2 holds of it
    and without the state its manifest cannot vouch for."""
    metadata = ContainerMetadata(container_id)
    ids: dict[int, str] = {}
    for m in manifests:
        other = ids.setdefault(m.segment_id, m.name)
        if other != m.name:
            raise InvalidArgumentError(
                f"the manifests of {other!r} and {m.name!r} in container {container_id}"
                f" both carry segment id {m.segment_id}: Tier 2 is inconsistent, not rebuilding"
            )
        metadata.segment_count += 1
        metadata.next_segment_id = max(metadata.next_segment_id, m.segment_id + 1)
        if m.complete:
            continue
        state = m.state
        metadata.add(
            SegmentMetadata(
                id=m.segment_id,
                name=m.name,
                created_ms=now_ms if state is None else state.created_ms,
                last_modified_ms=now_ms if state is None else state.last_modified_ms,
                start_offset=m.start_offset,
                length=m.storage_length,
                storage_length=m.storage_length,
                sealed=m.sealed,
                sealed_in_storage=m.sealed,
                # Writer sequences of appends Tier 2 may lack would refuse their retries.
                attributes={} if state is None else dict(state.attributes),
                retention={} if state is None else dict(state.retention),
            )
        )
    return metadata


async def rebuild_from_tier2(
    storage: ChunkStorage,
    uri: str,
    containers: int,
    data_log_of: Callable[[int], DurableDataLog],
    settings: DurableLogSettings,
) -> RebuildReport:
    """Rebuild the Tier 1 log of every container whose log is empty from the manifests in
    ``storage``; ``InvalidArgumentError`` if Tier 1 or Tier 2 fails meanwhile (a rebuild that
    stops halfway is simply run again)."""
    reader = SegmentReader(storage)
    try:
        manifests = await asyncio.to_thread(reader.list_segments)
        damage = {m.name: await asyncio.to_thread(damaged_ranges, reader, m) for m in manifests}
    except Tier2Error as error:
        raise InvalidArgumentError(f"cannot read the manifests in {uri}: {error}") from error
    grouped = segments_by_container(manifests, containers)
    report = RebuildReport(uri, int(time.time() * 1000))
    for container_id in range(containers):
        found = grouped.get(container_id, [])
        try:
            rebuilt = await _rebuild_container(
                container_id,
                data_log_of(container_id),
                found,
                settings,
                report.rebuilt_at_ms,
                damage,
            )
        except DataLogError as error:
            raise InvalidArgumentError(
                f"cannot rebuild Tier 1 of container {container_id}: {error}"
            ) from error
        report.containers.append(rebuilt)
    return report


async def _rebuild_container(
    container_id: int,
    data_log: DurableDataLog,
    manifests: list[SegmentManifest],
    settings: DurableLogSettings,
    now_ms: int,
    damage: dict[str, tuple[str, ...]],
) -> ContainerRebuild:
    above_owners = 1 + max((m.owner_epoch for m in manifests), default=0)
    epoch = await data_log.open(min_epoch=above_owners)
    try:
        kept = await _holds_records(data_log)
        if not kept:
            metadata = metadata_from_manifests(container_id, manifests, now_ms)
            await _write_checkpoint(container_id, data_log, metadata, settings)
    finally:
        await data_log.close()
    segments = tuple(RebuiltSegment.of(m, damage.get(m.name, ())) for m in manifests)
    return ContainerRebuild(container_id, epoch, segments, kept)


def damaged_ranges(reader: SegmentReader, manifest: SegmentManifest) -> tuple[str, ...]:
    """Read ``manifest``'s bytes back, verified; the ranges that fail, described."""
    found: list[str] = []
    position, end = manifest.start_offset, manifest.storage_length
    while position < end:
        try:
            position += len(
                reader.read_from(manifest, position, min(_VERIFY_PIECE, end - position))
            )
        except ChunkCorruptedError as error:
            found.append(f"[{error.start}, {error.end}) in chunk {error.chunk}: {error.reason}")
            position = max(error.end, position + 1)
        except ChunkNotFoundError as error:
            chunk = next(c for c in manifest.chunks if c.key == error.key)
            found.append(f"[{chunk.start_offset}, {chunk.end_offset}): chunk {chunk.key} is gone")
            position = chunk.end_offset
    return tuple(found)


async def _holds_records(data_log: DurableDataLog) -> bool:
    records = data_log.read()
    try:
        async for _record in records:
            return True
        return False
    finally:
        if isinstance(records, AsyncGenerator):
            await records.aclose()


async def _write_checkpoint(
    container_id: int,
    data_log: DurableDataLog,
    metadata: ContainerMetadata,
    settings: DurableLogSettings,
) -> None:
    """Write ``metadata`` as the log's first checkpoint, through the Durable Log itself, so
    the record is exactly what recovery reads."""
    durable_log = DurableLog(
        container_id,
        data_log,
        metadata,
        settings,
        commit=lambda ops: None,
        needed_sequence=lambda: None,
        on_failure=lambda error: None,  # the checkpoint's own future carries the failure
        release=lambda reserved: None,
    )
    durable_log.start()
    try:
        await durable_log.checkpoint()
    finally:
        await durable_log.stop()
