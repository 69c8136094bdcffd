"""The offsets of the streaming source: where each micro-batch of each segment ends.

An offset is a JSON object ``{"segment name": offset}``; every value is an *event boundary*
of that segment, so a micro-batch ``[start, end)`` holds whole events only and the next one
begins exactly where it ended: no event is read twice or skipped, whatever Spark's checkpoint
restarts from. What is new is what the Storage Writer has flushed: each segment's Tier 2
``storage_length``. A flush may end inside an event (where a chunk rolls, an append is split
between two manifest updates), and ``maxBytesPerTrigger`` cuts anywhere, so the end of a
micro-batch is the last event boundary at or below that target:

1. the greatest append boundary that the chunks' time index sidecars record in
   ``(known, target]`` (appends made by ``:appendEvents`` are whole events), else ``known``;
2. from there, a walk of the event headers over the few bytes up to ``target`` (a sidecar
   records a boundary about every ``time_index_interval_bytes``, 4 KiB by default).

A limit smaller than the next event still moves on by that one event once it is flushed, as
Kafka's source returns at least one record, so a query never stalls.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from segmentstore.jobs.errors import DataLossError
from segmentstore.jobs.framing import HEADER, walk_events
from segmentstore.jobs.partition_reader import read_range
from segmentstore.tier2 import ChunkStorage, SegmentManifest, SegmentReader

log = logging.getLogger(__name__)

Offsets = dict[str, int]


def flushed_offsets(manifests: list[SegmentManifest], storage: ChunkStorage) -> Offsets:
    """Each segment's last event boundary at or below its storage length (option
    ``starting_offsets=latest``)."""
    reader = SegmentReader(storage)
    return {
        m.name: last_boundary(storage, reader, m, m.start_offset, m.storage_length)
        for m in manifests
    }


def next_offsets(
    start: Mapping[str, int],
    manifests: list[SegmentManifest],
    storage: ChunkStorage,
    *,
    max_bytes: int | None,
    fail_on_data_loss: bool,
) -> Offsets:
    """Where the next micro-batch ends for each segment, given where it starts.

    Segments new since ``start`` begin at their start offset; segments no longer listed keep
    their offsets. ``max_bytes`` is shared among the segments in proportion to what each has
    pending. A segment truncated past its ``start`` is data loss: an error, or with
    ``fail_on_data_loss`` false a warning and a read from its new start offset on.
    """
    reader = SegmentReader(storage)
    begins = {m.name: _begin(m, start.get(m.name), fail_on_data_loss) for m in manifests}
    pending = {m.name: max(0, m.storage_length - begins[m.name]) for m in manifests}
    total = sum(pending.values())
    ends = dict(start)
    for manifest in manifests:
        name = manifest.name
        begin = begins[name]
        target = manifest.storage_length
        if max_bytes is not None and total > max_bytes:
            target = min(target, begin + max_bytes * pending[name] // total)
        end = last_boundary(storage, reader, manifest, begin, target)
        if end == begin and target < manifest.storage_length:
            end = _one_event(storage, manifest, begin)
        ends[name] = end
    return ends


def _begin(manifest: SegmentManifest, committed: int | None, fail_on_data_loss: bool) -> int:
    if committed is None:
        return manifest.start_offset
    if committed > manifest.storage_length:
        raise DataLossError(
            manifest.name,
            f"the query's offset {committed} is past its storage length "
            f"{manifest.storage_length} in Tier 2 (was it deleted and created again?)",
        )
    if committed >= manifest.start_offset:
        return committed
    if fail_on_data_loss:
        raise DataLossError(
            manifest.name,
            f"bytes [{committed}, {manifest.start_offset}) were truncated before the "
            "streaming query read them",
        )
    log.warning(
        "segment %r: bytes [%d, %d) were truncated before the query read them; going on at %d",
        manifest.name,
        committed,
        manifest.start_offset,
        manifest.start_offset,
    )
    return manifest.start_offset


def last_boundary(
    storage: ChunkStorage, reader: SegmentReader, manifest: SegmentManifest, known: int, target: int
) -> int:
    """The last event boundary in ``[known, target]``; ``known`` must be one."""
    if target <= known:
        return known
    best = known
    for chunk in reversed(manifest.chunks):
        if chunk.end_offset <= known:
            break
        if chunk.start_offset > target:
            continue
        inside = [e.offset for e in reader.time_index(chunk) if known < e.offset <= target]
        if inside:
            best = max(inside)
            break
    data = read_range(storage, manifest.chunks, best, target)
    return best + walk_events(data, manifest.name, best).whole


def _one_event(storage: ChunkStorage, manifest: SegmentManifest, at: int) -> int:
    """The end of the event at ``at`` if Tier 2 holds all of it, else ``at``."""
    if at + HEADER.size > manifest.storage_length:
        return at
    header = read_range(storage, manifest.chunks, at, at + HEADER.size)
    walk = walk_events(header, manifest.name, at)
    end = at + (walk.whole or walk.need)
    return end if end <= manifest.storage_length else at
