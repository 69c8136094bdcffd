"""Planning a scan: one snapshot of the manifests, cut into partitions that executors read.

Each selected segment's manifest is read exactly once, here (:mod:`segmentstore.jobs.selection`);
the partitions carry the chunks they need, so executors never read a manifest and every
partition reads the same snapshot. Reads are clamped to ``[start_offset, storage_length)`` of
that snapshot; where they start and end is :mod:`segmentstore.jobs.positions`.

In ``bytes`` mode a partition is one chunk. In ``events`` mode a chunk may begin inside an
event (the Storage Writer splits appends where chunks roll), so a partition may only begin
where an event is known to begin: the first at the scan's starting offset, each later one at
the first append boundary that a chunk's time index sidecar records
(:mod:`segmentstore.tier2.chunk_index`; appends made by ``:appendEvents`` are whole events). A chunk
with no such boundary joins the partition before it. ``min_partitions`` cuts large partitions
further, events mode at recorded boundaries only. Nothing here is trusted blindly: each
partition must decode exactly up to the start of the next
(:mod:`segmentstore.jobs.partition_reader`), which proves every split by induction from the first.

Chunks that the manifest names but Tier 2 lacks, and truncated bytes, are data loss: an error,
or with ``fail_on_data_loss=false`` a warning and an entry in :attr:`ScanPlan.lost`.
"""

from __future__ import annotations

import itertools
import logging
import math
from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from segmentstore.jobs.boundaries import SegmentBoundaries
from segmentstore.jobs.errors import DataLossError, ScanOptionsError
from segmentstore.jobs.options import ScanOptions
from segmentstore.jobs.positions import LostRange, ending_offset, starting_offset, wanted
from segmentstore.jobs.selection import select_segments
from segmentstore.tier2 import ChunkInfo, ChunkStorage, SegmentManifest, chunks_of

__all__ = ["LostRange", "ScanPartition", "ScanPlan", "SegmentRange", "plan_scan"]

log = logging.getLogger(__name__)

_SIDECAR_READERS = 8  # sidecars are tiny: many at once hides the latency of S3 requests


@dataclass(frozen=True)
class ScanPartition:
    """Read segment bytes ``[start, stop)`` from ``chunks`` (which hold exactly that range).

    ``exact``: ``stop`` is where the next partition begins (or an ending offset known to be
    an event boundary), so the events must end exactly there; otherwise ``stop`` is the end
    of the scan and a partial event before it is left out.
    """

    segment: str
    mode: str
    start: int
    stop: int
    exact: bool
    chunks: tuple[ChunkInfo, ...]
    segment_id: int | None = None  # the incarnation planned (None: not known)


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


def plan_scan(
    options: ScanOptions,
    storage: ChunkStorage,
    *,
    offsets_are_boundaries: bool = False,
    manifests: list[SegmentManifest] | None = None,
    segment_ids: Mapping[str, int] | None = None,
) -> ScanPlan:
    """Read the manifests (once each, unless given) and cut the scan into partitions.

    ``offsets_are_boundaries``: the starting and ending offsets are event boundaries already
    proven (a streaming micro-batch's), so they are not proven again, and each segment's last
    partition must end exactly at its ending offset, not before a partial event that the next
    micro-batch would then skip. ``segment_ids``: the incarnations the offsets belong to (a
    micro-batch's, or those the offset options name); a segment that is another one by now
    (deleted and created again) is data loss, or with ``fail_on_data_loss`` false left out
    with a warning.
    """
    if manifests is None:
        manifests = select_segments(options, storage)
    ids = {**options.starting.segment_ids, **options.ending.segment_ids, **(segment_ids or {})}
    if ids:
        manifests = [m for m in manifests if _same_incarnation(m, ids, options)]
    for option, bound in (("starting", options.starting), ("ending", options.ending)):
        if unselected := sorted(n for n in bound.named() if not options.segments.matches(n)):
            raise ScanOptionsError(
                f"the {option} offsets or timestamps name segments that option segments="
                f"{options.segments.describe()} does not select: {unselected}"
            )
    plan = ScanPlan()
    with ThreadPoolExecutor(_SIDECAR_READERS, thread_name_prefix="plan") as pool:
        planned = [
            _plan_segment(m, options, storage, pool, plan, offsets_are_boundaries)
            for m in manifests
        ]
        if options.min_partitions > len(plan.partitions):
            plan.partitions = _split(plan.partitions, options.min_partitions, planned, pool)
    return plan


def _same_incarnation(
    manifest: SegmentManifest, segment_ids: Mapping[str, int], options: ScanOptions
) -> bool:
    expected = segment_ids.get(manifest.name, manifest.segment_id)
    if expected == manifest.segment_id:
        return True
    reason = (
        f"it was deleted and created again (segment id {expected}, now {manifest.segment_id})"
        " since the range to read was decided"
    )
    if options.fail_on_data_loss:
        raise DataLossError(manifest.name, reason)
    log.warning("segment %r: %s; left out", manifest.name, reason)
    return False


def _plan_segment(
    manifest: SegmentManifest,
    options: ScanOptions,
    storage: ChunkStorage,
    pool: ThreadPoolExecutor,
    plan: ScanPlan,
    proven: bool,
) -> tuple[SegmentBoundaries, set[str]]:
    name = manifest.name
    events = options.mode == "events"
    boundaries = SegmentBoundaries(storage, manifest, verify=options.verify_checksums)
    start = starting_offset(
        options.starting,
        boundaries,
        events=events,
        fail_on_data_loss=options.fail_on_data_loss,
        lost=plan.lost,
        check_given=not proven,
    )
    stop, exact_end = ending_offset(
        options.ending, boundaries, events=events, check_given=not proven
    )
    exact_end = exact_end or (proven and events)
    if wanted(options.starting, boundaries).offset > stop:
        raise ScanOptionsError(
            f"segment {name!r}: ending offset {stop} is below the starting offset "
            f"{wanted(options.starting, boundaries).offset}"
        )
    if start is None or start > stop:  # the read begins past what Tier 2 holds yet
        start = stop
    plan.segments.append(SegmentRange(name, start, stop, manifest.storage_length, manifest.version))
    chunks = [
        c for c in manifest.chunks if c.length and c.end_offset > start and c.start_offset < stop
    ]
    present = _present_chunks(name, chunks, storage) if chunks else set()
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
    if not chunks:
        return boundaries, present
    if not events:
        plan.partitions += [
            ScanPartition(
                name,
                "bytes",
                max(start, c.start_offset),
                min(stop, c.end_offset),
                False,
                (c,),
                manifest.segment_id,
            )
            for c in chunks
            if c.key in present
        ]
        return boundaries, present
    later = [c for c in chunks if c.start_offset > start]
    boundaries.preload(later, pool)
    cuts = [start]
    for chunk in later:
        offsets = boundaries.entries(chunk)[0]
        first = bisect_right(offsets, start)
        if first < len(offsets) and offsets[first] < stop:
            cuts.append(offsets[first])
    for begin, end in zip(cuts, [*cuts[1:], stop], strict=True):
        exact = exact_end or end != stop
        plan.partitions.append(
            ScanPartition(
                name,
                "events",
                begin,
                end,
                exact,
                _chunks_between(chunks, begin, end),
                manifest.segment_id,
            )
        )
    return boundaries, present


def _split(
    partitions: list[ScanPartition],
    wanted_count: int,
    planned: list[tuple[SegmentBoundaries, set[str]]],
    pool: ThreadPoolExecutor,
) -> list[ScanPartition]:
    """``min_partitions``: cut each partition into pieces in proportion to its size, at the
    recorded boundaries nearest to even cuts (events mode) or at even cuts (bytes mode)."""
    of_segment = {b.manifest.name: (b, present) for b, present in planned}
    total = sum(p.stop - p.start for p in partitions) or 1
    result = []
    for partition in partitions:
        pieces = math.ceil(wanted_count * (partition.stop - partition.start) / total)
        if pieces <= 1:
            result.append(partition)
            continue
        step = (partition.stop - partition.start) / pieces
        ideal = [round(partition.start + step * i) for i in range(1, pieces)]
        if partition.mode == "bytes":
            cuts = ideal
        else:
            boundaries = of_segment[partition.segment][0]
            boundaries.preload(partition.chunks, pool)
            recorded = boundaries.recorded_between(partition.start, partition.stop)
            cuts = sorted({_nearest(recorded, at) for at in ideal} if recorded else set())
        edges = [partition.start, *cuts, partition.stop]
        for begin, end in itertools.pairwise(edges):
            last = end == partition.stop
            result.append(
                ScanPartition(
                    partition.segment,
                    partition.mode,
                    begin,
                    end,
                    partition.exact if last else partition.mode == "events",
                    _chunks_between(partition.chunks, begin, end),
                    partition.segment_id,
                )
            )
    return result


def _nearest(sorted_offsets: list[int], at: int) -> int:
    i = bisect_left(sorted_offsets, at)
    near = sorted_offsets[max(i - 1, 0) : i + 1]
    return min(near, key=lambda offset: abs(offset - at))


def _present_chunks(name: str, chunks: Sequence[ChunkInfo], storage: ChunkStorage) -> set[str]:
    """Which of ``chunks`` Tier 2 holds: one listing of the segment's chunk prefix, and a lookup
    for each chunk adopted from elsewhere (a merged transaction's)."""
    prefix = chunks_of(name)
    present = set(storage.list(prefix))
    for chunk in chunks:
        if not chunk.key.startswith(prefix) and storage.exists(chunk.key):
            present.add(chunk.key)
    return present


def _chunks_between(chunks: Sequence[ChunkInfo], start: int, stop: int) -> tuple[ChunkInfo, ...]:
    first = bisect_right(chunks, start, key=lambda c: c.start_offset) - 1
    return tuple(
        c for c in chunks[max(first, 0) :] if c.start_offset < stop and c.end_offset > start
    )
