"""Planning a scan: one snapshot of the manifests, cut into partitions that executors read.

Each selected segment's manifest is read exactly once, here; the partitions carry the chunks
they need, so executors never read a manifest and every partition reads the same snapshot.
Reads are clamped to ``[start_offset, storage_length)`` of that snapshot.

In ``bytes`` mode a partition is one chunk. In ``events`` mode a chunk may begin inside an
event (the Storage Writer splits appends where chunks roll), so a partition may only begin
where an event is known to begin: the first at the scan's starting offset, each later one at
the first append boundary that a chunk's time index sidecar records
(:mod:`segmentstore.tier2.time_index`; appends made by ``:appendEvents`` are whole events). A chunk
with no such boundary joins the partition before it. Nothing here is trusted blindly: each
partition must decode exactly up to the start of the next
(:mod:`segmentstore.jobs.partition_reader`), which proves every split by induction from the first.

Chunks that the manifest names but Tier 2 lacks, and requested offsets below the start offset
(truncated bytes), are data loss: an error, or with ``fail_on_data_loss=false`` a warning and
an entry in :attr:`ScanPlan.lost`.
"""

from __future__ import annotations

import logging
from bisect import bisect_right
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from segmentstore.jobs.errors import DataLossError, ScanOptionsError
from segmentstore.jobs.options import EARLIEST, LATEST, ScanOptions
from segmentstore.tier2 import (
    ChunkInfo,
    ChunkStorage,
    ManifestStore,
    SegmentManifest,
    SegmentReader,
    segment_key,
    time_index_key,
)

log = logging.getLogger(__name__)

_SIDECAR_READERS = 8  # sidecars are tiny: many at once hides the latency of S3 requests


@dataclass(frozen=True)
class ScanPartition:
    """Read segment bytes ``[start, stop)`` from ``chunks`` (which hold exactly that range).

    ``exact``: ``stop`` is where the next partition begins, so the events must end exactly
    there; otherwise ``stop`` is the end of the scan and a partial event before it is left out.
    """

    segment: str
    mode: str
    start: int
    stop: int
    exact: bool
    chunks: tuple[ChunkInfo, ...]


@dataclass(frozen=True)
class LostRange:
    """Bytes ``[start, stop)`` of ``segment`` that the scan cannot return; ``chunk`` is the
    missing chunk, or None for bytes truncated before the snapshot."""

    segment: str
    start: int
    stop: int
    chunk: str | None


@dataclass(frozen=True)
class SegmentRange:
    """What the scan covers of one segment: ``[start, stop)`` of its snapshot."""

    name: str
    start: int
    stop: int
    storage_length: int
    manifest_version: int


@dataclass
class ScanPlan:
    partitions: list[ScanPartition] = field(default_factory=list)
    segments: list[SegmentRange] = field(default_factory=list)
    lost: list[LostRange] = field(default_factory=list)


def plan_scan(options: ScanOptions, storage: ChunkStorage, *, exact_ends: bool = False) -> ScanPlan:
    """Read the manifests (once each) and cut the scan into partitions.

    ``exact_ends``: each segment's ending offset is known to be an event boundary (a streaming
    micro-batch's), so its last partition must end exactly there too, not before a partial
    event that the next micro-batch would then skip.
    """
    manifests = selected_manifests(options, storage)
    names = {m.name for m in manifests}
    for option, offsets in (
        ("starting_offsets", options.starting_offsets),
        ("ending_offsets", options.ending_offsets),
    ):
        if unknown := sorted(set(offsets) - names):
            raise ScanOptionsError(f"{option} names segments that are not read: {unknown}")
    plan = ScanPlan()
    reader = SegmentReader(storage)
    with ThreadPoolExecutor(_SIDECAR_READERS, thread_name_prefix="plan") as pool:
        for manifest in manifests:
            _plan_segment(manifest, options, storage, reader, pool, plan, exact_ends)
    return plan


def selected_manifests(
    options: ScanOptions, storage: ChunkStorage, *, required: bool = True
) -> list[SegmentManifest]:
    """The manifests of the selected segments, by name; a named segment without one is an
    error if ``required``, else left out (a stream waits for its first flush)."""
    selection = options.segments
    found: dict[str, SegmentManifest] = {}
    store = ManifestStore(storage)
    for name in selection.names:
        loaded = store.load(name)
        if loaded is None and not required:
            continue
        if loaded is None:
            raise ScanOptionsError(
                f"segment {name!r} has no manifest in Tier 2 at {storage.uri} "
                "(it does not exist, or nothing of it has been flushed yet)"
            )
        found[name] = loaded[0]
    if selection.prefixes:
        reader = SegmentReader(storage)
        shortest = min(selection.prefixes, key=len)
        common = shortest if all(p.startswith(shortest) for p in selection.prefixes) else ""
        for manifest in reader.list_segments(common):
            if manifest.name.startswith(selection.prefixes):
                found.setdefault(manifest.name, manifest)
    return [found[name] for name in sorted(found)]


def _plan_segment(
    manifest: SegmentManifest,
    options: ScanOptions,
    storage: ChunkStorage,
    reader: SegmentReader,
    pool: ThreadPoolExecutor,
    plan: ScanPlan,
    exact_ends: bool,
) -> None:
    name = manifest.name
    start = _starting_offset(manifest, options, plan)
    stop = _ending_offset(manifest, options)
    if stop < start:
        raise ScanOptionsError(f"segment {name!r}: ending offset {stop} is below starting {start}")
    plan.segments.append(SegmentRange(name, start, stop, manifest.storage_length, manifest.version))
    chunks = [
        c for c in manifest.chunks if c.length and c.end_offset > start and c.start_offset < stop
    ]
    if not chunks:
        return
    present = _present_chunks(name, chunks, storage)
    for chunk in chunks:
        if chunk.key not in present:
            lost = LostRange(
                name, max(start, chunk.start_offset), min(stop, chunk.end_offset), chunk.key
            )
            if options.fail_on_data_loss:
                raise DataLossError(
                    name,
                    f"the manifest (version {manifest.version}) names it for bytes "
                    f"[{lost.start}, {lost.stop}), but it is missing from Tier 2",
                    chunk.key,
                )
            log.warning("segment %r: chunk %s is missing; skipping its bytes", name, chunk.key)
            plan.lost.append(lost)
    if options.mode == "bytes":
        plan.partitions += [
            ScanPartition(
                name, "bytes", max(start, c.start_offset), min(stop, c.end_offset), False, (c,)
            )
            for c in chunks
            if c.key in present
        ]
        return
    later = [c for c in chunks if c.start_offset > start and time_index_key(c.key) in present]
    boundaries = [
        start,
        *filter(None, pool.map(lambda c: _first_boundary(reader, c, start, stop), later)),
    ]
    for begin, end in zip(boundaries, [*boundaries[1:], stop], strict=True):
        plan.partitions.append(
            ScanPartition(
                name,
                "events",
                begin,
                end,
                exact_ends or end != stop,
                _chunks_between(chunks, begin, end),
            )
        )


def _starting_offset(manifest: SegmentManifest, options: ScanOptions, plan: ScanPlan) -> int:
    name = manifest.name
    wanted = options.starting_offsets.get(name, EARLIEST)
    if wanted == EARLIEST:
        return manifest.start_offset
    if wanted == LATEST:
        return manifest.storage_length
    if wanted > manifest.storage_length:
        raise ScanOptionsError(
            f"segment {name!r}: starting offset {wanted} is beyond its storage length "
            f"{manifest.storage_length} in Tier 2"
        )
    if wanted < manifest.start_offset:
        if options.fail_on_data_loss:
            raise DataLossError(
                name,
                f"starting offset {wanted} is below its start offset {manifest.start_offset}: "
                f"bytes [{wanted}, {manifest.start_offset}) were truncated",
            )
        log.warning(
            "segment %r: bytes [%d, %d) were truncated; starting at %d",
            name,
            wanted,
            manifest.start_offset,
            manifest.start_offset,
        )
        plan.lost.append(LostRange(name, wanted, manifest.start_offset, None))
        return manifest.start_offset
    return wanted


def _ending_offset(manifest: SegmentManifest, options: ScanOptions) -> int:
    wanted = options.ending_offsets.get(manifest.name, LATEST)
    if wanted == LATEST:
        return manifest.storage_length
    if wanted == EARLIEST:
        return manifest.start_offset
    return min(wanted, manifest.storage_length)


def _present_chunks(name: str, chunks: Sequence[ChunkInfo], storage: ChunkStorage) -> set[str]:
    """Which of ``chunks`` (and of their sidecars) Tier 2 holds: one listing of the segment's
    prefix, and a lookup for each chunk adopted from elsewhere (a merged transaction's)."""
    prefix = segment_key(name) + "/"
    present = set(storage.list(prefix))
    for chunk in chunks:
        if not chunk.key.startswith(prefix):
            for key in (chunk.key, time_index_key(chunk.key)):
                if storage.exists(key):
                    present.add(key)
    return present


def _first_boundary(reader: SegmentReader, chunk: ChunkInfo, start: int, stop: int) -> int | None:
    """The first append boundary that ``chunk``'s sidecar records strictly inside the scan."""
    for entry in reader.time_index(chunk):
        if start < entry.offset < stop:
            return entry.offset
    return None


def _chunks_between(chunks: Sequence[ChunkInfo], start: int, stop: int) -> tuple[ChunkInfo, ...]:
    first = bisect_right(chunks, start, key=lambda c: c.start_offset) - 1
    return tuple(
        c for c in chunks[max(first, 0) :] if c.start_offset < stop and c.end_offset > start
    )
