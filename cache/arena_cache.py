"""``BlockArenaCache``: the cache contract over a ``BlockArena`` of anonymous ``mmap`` buffers.

Each entry is its length and its runs of blocks, kept as two ``array('i')``: the first block
of each run, and the entry's block count at the end of each run (cumulative, so the run that
holds byte ``o`` is a ``bisect`` for block ``o // block_bytes``). A read or view therefore costs
one step per run it touches, not per block, and a fresh arena hands an insert one run. Blocks
appended to an entry that follow its last run in the same buffer extend that run.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right

from segmentstore.cache.arena import BlockArena, Run
from segmentstore.cache.cache import DEFAULT_BLOCK_BYTES, Buffer, Cache, CacheStats
from segmentstore.cache.errors import (
    CacheClosedError,
    CacheEntryNotFoundError,
    CacheFullError,
    CacheRangeError,
)

DEFAULT_BUFFER_BYTES = 2 * 1024 * 1024


class _Entry:
    __slots__ = ("ends", "length", "starts")

    def __init__(self) -> None:
        self.length = 0
        self.starts = array("i")  # first block of each run
        self.ends = array("i")  # the entry's block count at the end of each run


class BlockArenaCache(Cache):
    """Payload in ``mmap`` buffers of ``buffer_bytes``, mapped as needed up to ``max_bytes``.

    Memory outside the arena: 4 bytes per mapped block for the free list, and per entry one
    small object and two arrays (8 bytes per run); entries are bounded by blocks.

    :meth:`view` lends slices of the buffers themselves, one per run of consecutive blocks in
    the range: zero-copy, with the validity rules of :meth:`Cache.view`. Views outstanding at
    :meth:`close` keep their buffer mapped until they are dropped; they never dangle.
    """

    def __init__(
        self,
        max_bytes: int,
        block_bytes: int = DEFAULT_BLOCK_BYTES,
        buffer_bytes: int = DEFAULT_BUFFER_BYTES,
    ) -> None:
        if max_bytes < block_bytes or block_bytes <= 0:
            raise ValueError(f"max_bytes ({max_bytes}) must hold a block of {block_bytes}")
        self._max_bytes = max_bytes
        self._block_bytes = block_bytes
        self._arena = BlockArena(max_bytes // block_bytes, block_bytes, buffer_bytes)
        self._blocks_per_buffer = self._arena.blocks_per_buffer
        # The arena's own lists, which it fills as it maps buffers: no lookups on the hot path.
        self._writable = self._arena.writable
        self._readonly = self._arena.readonly
        self._entries: dict[int, _Entry] = {}
        self._next_address = 1
        self._stored_bytes = 0
        self._hits = 0
        self._misses = 0
        self._evictions = 0
        self._closed = False

    @property
    def block_bytes(self) -> int:
        return self._block_bytes

    @property
    def max_bytes(self) -> int:
        return self._max_bytes

    @property
    def mapped_bytes(self) -> int:
        """Bytes of ``mmap`` buffers mapped so far: the high-water mark of ``used_bytes``,
        rounded up to whole buffers."""
        return self._arena.mapped_bytes

    def insert(self, data: Buffer) -> int:
        source = _byte_view(data)
        size = len(source)
        blocks = (size + self._block_bytes - 1) // self._block_bytes or 1
        self._reserve(blocks)
        entry = _Entry()
        self._add_runs(entry, self._arena.allocate(blocks))
        if size:
            self._write(entry, 0, source)
        entry.length = size
        address = self._next_address
        self._next_address = address + 1
        self._entries[address] = entry
        self._stored_bytes += size
        return address

    def append(self, address: int, data: Buffer) -> int:
        entry = self._entry(address)
        # bytes and bytearray are copied as they are; other buffers through a byte view.
        source = data if type(data) is bytes or type(data) is bytearray else _byte_view(data)
        size = len(source)
        length = entry.length
        block_bytes = self._block_bytes
        starts, ends = entry.starts, entry.ends
        run_begin = ends[-2] if len(ends) > 1 else 0  # the entry's block where its last run begins
        last_first = starts[-1]
        spare = ends[-1] * block_bytes - length
        one_copy = True  # the bytes land at the end of the last run
        if size > spare:
            blocks = (size - spare + block_bytes - 1) // block_bytes
            self._reserve(blocks)
            runs = self._arena.allocate(blocks)
            first, count = runs[0]
            if (
                len(runs) == 1
                and first == last_first + ends[-1] - run_begin
                and first % self._blocks_per_buffer
            ):
                # The new blocks follow the last run in its buffer (the usual case in an arena
                # filled in order): the run grows.
                ends[-1] += count
            else:
                self._add_runs(entry, runs)
                self._write(entry, length, memoryview(source))
                one_copy = False
        if one_copy:
            buffer, first_in_buffer = divmod(last_first, self._blocks_per_buffer)
            begin = (first_in_buffer - run_begin) * block_bytes + length
            self._writable[buffer][begin : begin + size] = source
        entry.length = length + size
        self._stored_bytes += size
        return length + size

    def read(self, address: int, offset: int, length: int) -> bytes:
        entry = self._hit(address, offset, length)
        if length == 0:
            return b""
        parts = self._slices(entry, offset, length, self._readonly)
        # bytes.join sizes the result first, then copies each view straight into it.
        return bytes(parts[0]) if len(parts) == 1 else b"".join(parts)

    def view(self, address: int, offset: int, length: int) -> list[memoryview]:
        entry = self._hit(address, offset, length)
        return self._slices(entry, offset, length, self._readonly) if length else []

    def length(self, address: int) -> int:
        return self._entry(address).length

    def delete(self, address: int) -> None:
        if self._closed:
            raise CacheClosedError()
        entry = self._entries.pop(address, None)
        if entry is None:
            raise CacheEntryNotFoundError(address)
        self._arena.free(entry.starts, entry.ends)
        self._stored_bytes -= entry.length

    def evict(self, address: int) -> None:
        self.delete(address)
        self._evictions += 1

    @property
    def used_bytes(self) -> int:
        return self._arena.used_blocks * self._block_bytes

    @property
    def stats(self) -> CacheStats:
        return CacheStats(
            used_bytes=self._arena.used_blocks * self._block_bytes,
            stored_bytes=self._stored_bytes,
            max_bytes=self._max_bytes,
            entries=len(self._entries),
            hits=self._hits,
            misses=self._misses,
            evictions=self._evictions,
        )

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._entries.clear()
            self._arena.close()

    def _entry(self, address: int) -> _Entry:
        entry = self._entries.get(address)
        if entry is None:
            raise CacheClosedError() if self._closed else CacheEntryNotFoundError(address)
        return entry

    def _hit(self, address: int, offset: int, length: int) -> _Entry:
        """The entry for a read or view of that range, counted as a hit or a miss."""
        entry = self._entries.get(address)
        if entry is None:
            if self._closed:
                raise CacheClosedError()
            self._misses += 1
            raise CacheEntryNotFoundError(address)
        if offset < 0 or length < 0 or offset + length > entry.length:
            raise CacheRangeError(address, offset, length, entry.length)
        self._hits += 1
        return entry

    def _reserve(self, blocks: int) -> None:
        if self._closed:
            raise CacheClosedError()
        if self._arena.used_blocks + blocks > self._arena.max_blocks:
            raise CacheFullError(
                blocks * self._block_bytes,
                self._arena.used_blocks * self._block_bytes,
                self._max_bytes,
            )

    def _add_runs(self, entry: _Entry, runs: list[Run]) -> None:
        starts, ends = entry.starts, entry.ends
        first, count = runs[0]
        if (
            starts
            and first == starts[-1] + ends[-1] - (ends[-2] if len(ends) > 1 else 0)
            and first % self._blocks_per_buffer
        ):
            ends[-1] += count  # continues the last run in the same buffer
            runs = runs[1:]
        total = ends[-1] if ends else 0
        for first, count in runs:
            total += count
            starts.append(first)
            ends.append(total)

    def _write(self, entry: _Entry, offset: int, source: memoryview) -> None:
        position = 0
        for target in self._slices(entry, offset, len(source), self._writable):
            size = len(target)
            target[:] = source[position : position + size]
            position += size

    def _slices(
        self, entry: _Entry, offset: int, length: int, buffers: list[memoryview]
    ) -> list[memoryview]:
        """Slices of ``buffers``, one per run, whose concatenation is ``[offset, +length)``.

        ``length`` must be positive and the range inside the entry's blocks.
        """
        block_bytes = self._block_bytes
        per_buffer = self._blocks_per_buffer
        starts, ends = entry.starts, entry.ends
        run = bisect_right(ends, offset // block_bytes)
        run_begin = ends[run - 1] if run else 0  # the entry's block index where the run begins
        buffer, first = divmod(starts[run], per_buffer)
        begin = (first - run_begin) * block_bytes + offset
        run_end = ends[run] * block_bytes  # the entry's byte offset where the run ends
        if offset + length <= run_end:
            return [buffers[buffer][begin : begin + length]]
        slices = [buffers[buffer][begin : begin + run_end - offset]]
        length -= run_end - offset
        while length > 0:
            run += 1
            buffer, first = divmod(starts[run], per_buffer)
            begin = first * block_bytes
            size = (ends[run] - ends[run - 1]) * block_bytes
            if size > length:
                size = length
            slices.append(buffers[buffer][begin : begin + size])
            length -= size
        return slices


def _byte_view(data: Buffer) -> memoryview:
    view = memoryview(data)
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")
