"""The offsets of the streaming source: where each micro-batch of each segment ends.

An offset is a JSON object ``{"segment name": {"segment_id": I, "offset": N}}``: ``I`` names
the incarnation of the segment (its id: a name deleted and created again is another segment
with another id), ``N`` is an *event boundary* of that segment (or, for a segment whose start a
truncation cut inside an event, its start offset, which every reader of it turns into the
first boundary after the cut), so a
micro-batch ``[start, end)`` holds whole events only and the next one begins exactly where it
ended: no event is read twice or skipped, whatever Spark's checkpoint restarts from. What is
new is what the Storage Writer has flushed: each segment's Tier 2 ``storage_length``. A flush
may end inside an event (where a chunk rolls, an append is split between two manifest
updates), and ``maxBytesPerTrigger`` cuts anywhere, so the end of a micro-batch is the last
event boundary at or below that target:

1. the greatest append boundary that the chunks' time index sidecars record in
   ``(known, target]`` (appends made by ``:appendEvents`` are whole events), else ``known``;
2. from there, a walk of the event headers over the few bytes up to ``target`` (a sidecar
   records a boundary about every ``time_index_interval_bytes``, 4 KiB by default).

A limit smaller than the next event still moves on by that one event once it is flushed, as
Kafka's source returns at least one record, so a query never stalls. ``Trigger.AvailableNow``
caps every segment at the boundary it had flushed when the query started (``caps``).

Incarnations (:func:`next_offsets`): a segment whose id is no longer the one in the offset
was deleted and created again since the query read it; one no longer listed was deleted. With
``fail_on_data_loss`` either fails the query, naming the segment; without it, a deleted segment
is dropped from the offsets and a re-created one is read from its start, each with a warning.
An offset of a bare number (written before offsets named incarnations) is taken for the
current incarnation.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from segmentstore.jobs.boundaries import SegmentBoundaries
from segmentstore.jobs.chunk_reads import read_range
from segmentstore.jobs.errors import DataLossError
from segmentstore.jobs.framing import HEADER, walk_events
from segmentstore.jobs.positions import LostRange, first_event, truncated
from segmentstore.tier2 import ChunkStorage, SegmentManifest

Offsets = dict[str, int]
Stamped = dict[str, Any]  # the offsets as Spark keeps them: {name: {"segment_id", "offset"}}

log = logging.getLogger(__name__)


def split_incarnations(stamped: Mapping[str, Any]) -> tuple[Offsets, Offsets]:
    """``(offsets, segment ids)`` of a stream offset; a bare number has no id."""
    offsets, ids = {}, {}
    for name, value in stamped.items():
        if isinstance(value, Mapping):
            offsets[name], ids[name] = int(value["offset"]), int(value["segment_id"])
        else:
            offsets[name] = int(value)
    return offsets, ids


def stamp(offsets: Mapping[str, int], ids: Mapping[str, int]) -> Stamped:
    """The stream offset of ``offsets``, each with its segment's id where it is known."""
    return {
        name: {"segment_id": ids[name], "offset": offset} if name in ids else offset
        for name, offset in offsets.items()
    }


def _incarnation_lost(name: str, what: str, fail_on_data_loss: bool, then: str) -> None:
    if fail_on_data_loss:
        raise DataLossError(name, f"{what} since the streaming query read it")
    log.warning("segment %r: %s since the streaming query read it; %s", name, what, then)


def flushed_boundary(boundaries: SegmentBoundaries) -> int | None:
    """The segment's last event boundary at or below its storage length (``latest``, and
    what ``Trigger.AvailableNow`` reads up to); None if Tier 2 holds no boundary yet past a
    truncation that cut an event."""
    manifest = boundaries.manifest
    known = boundaries.recorded_at_or_below(manifest.storage_length)
    if known is None or known < manifest.start_offset:
        known = boundaries.locate(manifest.start_offset).boundary
        if known is None:
            return None
    return last_boundary(boundaries, known, manifest.storage_length)


def next_offsets(
    start: Mapping[str, Any],
    manifests: list[SegmentManifest],
    storage: ChunkStorage,
    *,
    max_bytes: int | None,
    fail_on_data_loss: bool,
    caps: Mapping[str, int] | None = None,
) -> Stamped:
    """Where the next micro-batch ends for each segment, given where it starts (both stream
    offsets, with incarnations).

    Segments new since ``start`` begin at their first event; segments no longer listed keep
    their offsets, unless ``start`` knew their incarnation: then they were deleted (module
    docstring), as a segment whose id changed was created again. ``max_bytes`` is shared
    among the segments in proportion to what each has pending. A segment truncated past its
    ``start`` is data loss: an error, or with ``fail_on_data_loss`` false a read from its
    first event after the truncation on (the planner logs what it skips). ``caps``: read no
    segment past its cap, and no segment without one (``Trigger.AvailableNow``).
    """
    committed, committed_ids = split_incarnations(start)
    ends, ids = dict(committed), dict(committed_ids)
    listed = {m.name for m in manifests}
    for name in sorted(set(committed_ids) - listed):
        _incarnation_lost(name, "it was deleted", fail_on_data_loss, "it is dropped")
        del ends[name], ids[name]
    begins: dict[str, tuple[SegmentBoundaries, int]] = {}
    for manifest in manifests:
        name = manifest.name
        if caps is not None and name not in caps:
            continue
        was = committed_ids.get(name, manifest.segment_id)
        offset = committed.get(name)
        if was != manifest.segment_id:
            what = f"it was deleted and created again (segment id {was}, now {manifest.segment_id})"
            _incarnation_lost(name, what, fail_on_data_loss, "the new one is read from its start")
            offset = None
        ids[name] = manifest.segment_id
        boundaries = SegmentBoundaries(storage, manifest)
        begin = _begin(boundaries, offset, fail_on_data_loss)
        if begin is not None:
            begins[manifest.name] = (boundaries, begin)
    targets = {}
    for name, (boundaries, begin) in begins.items():
        target = boundaries.manifest.storage_length
        if caps is not None:
            target = min(target, caps[name])
        targets[name] = max(target, begin)
    pending = {name: targets[name] - begins[name][1] for name in begins}
    total = sum(pending.values())
    for name, (boundaries, begin) in begins.items():
        target = targets[name]
        if max_bytes is not None and total > max_bytes:
            target = min(target, begin + max_bytes * pending[name] // total)
        end = last_boundary(boundaries, begin, target)
        if end == begin and target < targets[name]:
            end = _one_event(boundaries, begin, targets[name])
        ends[name] = end
    return stamp(ends, ids)


def _begin(
    boundaries: SegmentBoundaries, committed: int | None, fail_on_data_loss: bool
) -> int | None:
    """Where the segment's next micro-batch begins: an event boundary, or None while Tier 2
    does not hold the first boundary after a truncation that cut an event."""
    manifest = boundaries.manifest
    if committed is not None and committed > manifest.storage_length:
        raise DataLossError(
            manifest.name,
            f"the query's offset {committed} is past its storage length "
            f"{manifest.storage_length} in Tier 2 (was it deleted and created again?)",
        )
    if committed is not None and committed > manifest.start_offset:
        return committed
    lost: list[LostRange] = []  # logged when the micro-batch is planned
    if committed is not None and committed < manifest.start_offset:
        before = "the streaming query read them"
        truncated(
            manifest.name,
            committed,
            manifest.start_offset,
            fail_on_data_loss,
            lost,
            before,
            quiet=True,
        )
    return first_event(boundaries, fail_on_data_loss, lost, quiet=True)


def last_boundary(boundaries: SegmentBoundaries, known: int, target: int) -> int:
    """The last event boundary in ``[known, target]``; ``known`` must be one."""
    if target <= known:
        return known
    recorded = boundaries.recorded_at_or_below(target)
    best = recorded if recorded is not None and recorded > known else known
    manifest = boundaries.manifest
    data = read_range(boundaries.reader, manifest.name, manifest.chunks, best, target)
    return best + walk_events(data, manifest.name, best).whole


def _one_event(boundaries: SegmentBoundaries, at: int, limit: int) -> int:
    """The end of the event at ``at`` if it ends by ``limit``, else ``at``."""
    if at + HEADER.size > limit:
        return at
    manifest = boundaries.manifest
    header = read_range(boundaries.reader, manifest.name, manifest.chunks, at, at + HEADER.size)
    walk = walk_events(header, manifest.name, at)
    end = at + (walk.whole or walk.need)
    return end if end <= limit else at
