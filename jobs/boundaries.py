"""Where events begin in one segment's Tier 2 snapshot, as far as Tier 2 can prove it.

Events are whole appends (``:appendEvents``), and the Storage Writer records an append
boundary about every ``time_index_interval_bytes`` in each chunk's time index sidecar
(:mod:`segmentstore.tier2.chunk_index`). Any other offset is proven one of two ways:

1. by decoding events from the last recorded boundary at or below it (whose bytes Tier 2 still
   holds, even below a truncation, as long as the chunk is listed): the offset is a boundary if
   an event ends exactly there, and otherwise the event that runs across it says where the
   next boundary is;
2. else, by decoding from the offset itself up to the next recorded boundary: landing exactly
   on it proves the offset (the proof every split of a scan gets), anything else means the
   offset is inside an event and the next recorded boundary is the first one known.

A truncation (``:truncate``) may cut an event: the segment's start offset is then not a
boundary, and the rest of the cut event, ``[start_offset, next boundary)``, is data loss. Times
are answered as ``:offsetAt`` answers them (:meth:`SegmentBoundaries.at_time`).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

from segmentstore.jobs.chunk_reads import MissingChunkError, read_range
from segmentstore.jobs.errors import BrokenFramingError
from segmentstore.jobs.framing import HEADER, walk_events
from segmentstore.tier2 import (
    ChunkCorruptedError,
    ChunkInfo,
    ChunkStorage,
    SegmentManifest,
    SegmentReader,
)

# A proof decodes at most this much (entries are ~4 KiB apart, or one large append apart): a
# segment written without sidecars could otherwise be read whole at planning time.
FORWARD_PROOF_BYTES = 8 * 1024 * 1024


class Located(NamedTuple):
    """Where ``offset`` lies: on a boundary (``boundary == offset``), inside an event whose
    end is the first boundary after it (``boundary > offset``), or inside an event whose end
    Tier 2 does not hold yet (``boundary`` None). ``event`` is where the event around it
    begins, when that is known."""

    offset: int
    boundary: int | None
    event: int | None = None

    def describe(self) -> str:
        """``inside the event [P, E)``, as much of it as is known."""
        start = "?" if self.event is None else str(self.event)
        end = "?" if self.boundary is None else str(self.boundary)
        return f"inside the event [{start}, {end})"

    @property
    def is_boundary(self) -> bool:
        return self.boundary == self.offset


class SegmentBoundaries:
    """Lookups over one manifest; sidecars are read once each. Not thread-safe, but for
    :meth:`preload`."""

    def __init__(
        self, storage: ChunkStorage, manifest: SegmentManifest, *, verify: bool = True
    ) -> None:
        self.storage = storage
        self.reader = SegmentReader(storage, verify=verify)
        self.manifest = manifest
        self._entries: dict[str, tuple[list[int], list[int]]] = {}

    def entries(self, chunk: ChunkInfo) -> tuple[list[int], list[int]]:
        """The offsets and times (ms) of the boundaries ``chunk``'s index records."""
        found = self._entries.get(chunk.key)
        if found is None:
            entries = self.reader.time_index(chunk)
            found = self._entries[chunk.key] = (
                [e.offset for e in entries],
                [e.time_ms for e in entries],
            )
        return found

    def preload(self, chunks: Sequence[ChunkInfo], pool: ThreadPoolExecutor) -> None:
        """Read the indexes of ``chunks`` at once: they are small, and reading many together
        hides the latency of S3 requests."""
        wanted = [c for c in chunks if c.key not in self._entries]
        for chunk, found in zip(wanted, pool.map(self.entries, wanted), strict=True):
            self._entries[chunk.key] = found

    def recorded_between(self, low: int, high: int) -> list[int]:
        """The recorded boundaries strictly between ``low`` and ``high``, in order."""
        found: list[int] = []
        for chunk in self.manifest.chunks:
            if chunk.end_offset <= low or not chunk.length:
                continue
            if chunk.start_offset >= high:
                break
            offsets = self.entries(chunk)[0]
            found += offsets[bisect_right(offsets, low) : bisect_left(offsets, high)]
        return found

    def recorded_at_or_below(self, offset: int) -> int | None:
        """The last recorded boundary at or below ``offset`` in the listed chunks."""
        chunks = self.manifest.chunks
        index = bisect_right(chunks, offset, key=lambda c: c.start_offset) - 1
        for chunk in reversed(chunks[: index + 1]):
            offsets = self.entries(chunk)[0]
            below = bisect_right(offsets, offset)
            if below:
                return offsets[below - 1]
        if chunks and chunks[0].start_offset == 0:
            return 0  # a segment's first byte begins its first event
        return None

    def _recorded_above(self, offset: int) -> int | None:
        chunks = self.manifest.chunks
        index = max(bisect_right(chunks, offset, key=lambda c: c.start_offset) - 1, 0)
        for chunk in chunks[index:]:
            offsets = self.entries(chunk)[0]
            above = bisect_right(offsets, offset)
            if above < len(offsets):
                return offsets[above]
        return None

    def locate(self, offset: int) -> Located:
        """Whether ``offset`` (inside ``[first listed byte, storage_length]``) is an event
        boundary, and if not, the first boundary after it."""
        manifest = self.manifest
        if offset == 0:
            return Located(offset, offset)
        below = self.recorded_at_or_below(offset)
        if below == offset:
            return Located(offset, offset)
        if below is not None and offset - below <= FORWARD_PROOF_BYTES:
            found = self._from_below(below, offset)
            if found is not None:
                return found
        if offset >= manifest.storage_length:
            return Located(offset, None)  # nothing after it to decode yet
        above = self._recorded_above(offset)
        stop = (
            above
            if above is not None
            else min(manifest.storage_length, offset + FORWARD_PROOF_BYTES)
        )
        try:
            walk = walk_events(self._read(offset, stop), manifest.name, offset)
        except (BrokenFramingError, MissingChunkError, ChunkCorruptedError):
            return Located(offset, above)
        if above is None or offset + walk.whole == above:
            return Located(offset, offset)  # proven, or (with nothing recorded after) assumed
        return Located(offset, above)

    def _from_below(self, below: int, offset: int) -> Located | None:
        """Decode from the recorded boundary ``below`` to ``offset``; None if those bytes are
        not events (or are gone)."""
        try:
            data = self._read(below, offset)
            walk = walk_events(data, self.manifest.name, below)
            if walk.whole == len(data):
                return Located(offset, offset)
            event = below + walk.whole  # the event that runs across the offset
            size = walk.need
            if size == HEADER.size and offset - event < HEADER.size:  # its header is cut too
                header = self._read(event, event + HEADER.size)
                if len(header) < HEADER.size:
                    return Located(offset, None, event)  # the header is not all flushed yet
                cut = walk_events(header, self.manifest.name, event)
                size = cut.need or cut.whole
        except (BrokenFramingError, MissingChunkError, ChunkCorruptedError):
            return None
        return Located(offset, event + size, event)

    def _read(self, start: int, stop: int) -> bytes | memoryview:
        stop = min(stop, self.manifest.storage_length)
        if start >= stop:
            return b""
        return read_range(self.reader, self.manifest.name, self.manifest.chunks, start, stop)

    def first_recorded_at_or_above(self, offset: int) -> int | None:
        """The first recorded boundary at or above ``offset`` in the listed chunks."""
        return self._recorded_above(offset - 1)

    def at_time(self, time_ms: int) -> int:
        """``:offsetAt``'s answer from Tier 2: the latest recorded boundary of an append made
        before ``time_ms`` (found as the store finds it: a binary search over the chunks by
        the time of their first entry, then inside one), kept within ``[start_offset,
        storage_length]``; the start offset if no recorded append is older."""
        chunks = [c for c in self.manifest.chunks if c.length]
        low, high = 0, len(chunks)
        best: tuple[list[int], list[int]] | None = None
        while low < high:
            middle = (low + high) // 2
            j = middle
            while j < high and not self.entries(chunks[j])[0]:
                j += 1
            if j == high:
                high = middle  # nothing recorded in [middle, high)
                continue
            entries = self.entries(chunks[j])
            if entries[1][0] < time_ms:
                best, low = entries, j + 1
            else:
                high = middle
        manifest = self.manifest
        if best is None:
            return manifest.start_offset
        offsets, times = best
        offset = offsets[bisect_left(times, time_ms) - 1]
        return min(max(offset, manifest.start_offset), manifest.storage_length)
