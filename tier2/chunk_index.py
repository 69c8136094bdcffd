"""The index of one chunk: a CRC32C checksum for every block of its bytes, and its append
boundaries with the time each append was made (the sparse time index).

This module is the only code that writes, reads or verifies a chunk's index: the Storage
Writer builds one with :class:`ChunkIndexBuilder`, and every reader (the store's cache-miss
reads, ``segmentstore tier2 cat``, the Spark source, the Tier 1 rebuild) loads it with
:func:`load_chunk_index` and reads chunk bytes through :func:`read_verified`. An index is kept
in one of two places, both written with the chunk's bytes and before the manifest that names
them: in the manifest itself (:attr:`ChunkInfo.index`), for a segment's last chunk while its
index is at most :data:`INLINE_INDEX_BYTES` (so a small segment costs two objects, its chunk
and its manifest), or else in an object beside the chunk (key:
:func:`segmentstore.tier2.layout.time_index_key`). Its bytes, little-endian::

    index   = "SSTIDX2\\n" record*
    record  = kind:u8  0:u8*3  crc:u32  a:u64  b:i64  record_crc:u32
    kind 1  an append boundary: a = its offset in the chunk, b = the append's time (ms)
    kind 2  a block: a = its start in the chunk, b = its end, crc = CRC32C of its bytes

``record_crc`` is the CRC32C of the record's first 24 bytes. Blocks are cut at every multiple
of the writer's block size in *segment* offsets (and at the chunk's edges); a block that a
later append to the same chunk extends is recorded again, and the later record supersedes the
earlier. Boundaries are those of the segment's time index (a later record for the same offset
supersedes an earlier one's time: a merge re-times the chunks it adopts), at least one in
every aligned window of ``time_index_interval_bytes`` where an append begins: the block size
is a multiple of that interval, so the first boundary recorded at or after a block's end is
the first event after it, which is where a reader that skips a damaged block resumes.

Offsets are relative to the chunk, so a merge that moves a chunk into another segment keeps its
index valid. Where an object may be appended to, the index grows with its chunk; after a crash
it may hold records past the length that the manifest gives the chunk, or a torn or damaged
last record: readers ignore the records past that length, and stop at the first record whose
own CRC fails. The bytes of a chunk that no valid block record covers cannot be verified, and
reading them is an error (:class:`~segmentstore.tier2.errors.ChunkCorruptedError`), as is a
block whose bytes do not match their CRC or are missing from a short chunk.

Indexes of the first format (``"SSTIDX1\\n"``, boundaries only, written before chunks carried
checksums) are still read for their boundaries; their chunks have no checksums
(``ChunkIndex.checksummed`` is false), and so does a chunk with no index object: readers that
verify refuse their bytes.
"""

from __future__ import annotations

import struct
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from crc32c import crc32c

from segmentstore.tier2.chunk_storage import Buffer, ChunkStorage
from segmentstore.tier2.errors import (
    ChunkCorruptedError,
    ChunkNotFoundError,
    ChunkRangeError,
    InvalidManifestError,
)
from segmentstore.tier2.layout import time_index_key
from segmentstore.tier2.manifest import ChunkInfo

MAGIC = b"SSTIDX2\n"
# A segment's last chunk keeps its index in the manifest up to this size (the magic and 36
# records: a few dozen small appends, or about 100 KiB of appends at the default time index
# interval); a larger index, and the index of every chunk but the last, is an object.
INLINE_INDEX_BYTES = 1024
MAGIC_V1 = b"SSTIDX1\n"
_BODY = struct.Struct("<B3xIQq")
_RECORD_CRC = struct.Struct("<I")
_RECORD = struct.Struct("<B3xIQqI")  # a body and its CRC
RECORD_SIZE = _RECORD.size
_V1_ENTRY = struct.Struct("<Qq")
_BOUNDARY, _BLOCK = 1, 2


class TimeIndexEntry(NamedTuple):
    """The append that began at segment offset ``offset`` was made at ``time_ms``."""

    offset: int
    time_ms: int


class Block(NamedTuple):
    """Segment bytes ``[start, end)`` of a chunk have the CRC32C ``crc``."""

    start: int
    end: int
    crc: int


@dataclass(frozen=True, slots=True)
class ChunkIndex:
    """The index of one chunk as its manifest entry gives it, in segment offsets.

    ``blocks`` tile the chunk from its first byte up to ``covered_to`` (the chunk's end when
    the index is whole); ``boundaries`` are in offset order, their times never decrease.
    """

    chunk: ChunkInfo
    boundaries: tuple[TimeIndexEntry, ...] = ()
    blocks: tuple[Block, ...] = ()
    checksummed: bool = True
    _starts: list[int] = field(default_factory=list, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        self._starts.extend(b.start for b in self.blocks)

    @property
    def covered_to(self) -> int:
        """Where the blocks end: bytes from here to the chunk's end have no checksum."""
        return self.blocks[-1].end if self.blocks else self.chunk.start_offset

    def blocks_over(self, low: int, high: int) -> tuple[int, int] | None:
        """The indexes ``[first, last]`` of the blocks that hold ``[low, high)`` (``high >
        low``), or None if some of it is past ``covered_to``."""
        if high > self.covered_to or low < self.chunk.start_offset:
            return None
        first = bisect_right(self._starts, low) - 1
        last = bisect_right(self._starts, high - 1) - 1
        return first, last

    def encode(self) -> bytes:
        """The whole index as one object (what a merge rewrites)."""
        start = self.chunk.start_offset
        records = [_boundary(e.offset - start, e.time_ms) for e in self.boundaries]
        records += [_block(b.start - start, b.end - start, b.crc) for b in self.blocks]
        return MAGIC + b"".join(records)

    def without_boundaries(self) -> ChunkIndex:
        """Only what verifying needs (to keep many in memory)."""
        return ChunkIndex(self.chunk, (), self.blocks, self.checksummed)

    def with_times(self, time_ms: int) -> ChunkIndex:
        """The same index with every boundary's time replaced (a merge is one append)."""
        boundaries = tuple(e._replace(time_ms=time_ms) for e in self.boundaries)
        return ChunkIndex(self.chunk, boundaries, self.blocks, self.checksummed)


def _boundary(relative: int, time_ms: int) -> bytes:
    body = _BODY.pack(_BOUNDARY, 0, relative, time_ms)
    return body + _RECORD_CRC.pack(crc32c(body))


def _block(start: int, end: int, crc: int) -> bytes:
    body = _BODY.pack(_BLOCK, crc, start, end)
    return body + _RECORD_CRC.pack(crc32c(body))


def decode_chunk_index(
    key: str, data: bytes, chunk: ChunkInfo, *, boundaries: bool = True
) -> ChunkIndex:
    """The index that the object ``data`` (at ``key``) holds for ``chunk``. Without
    ``boundaries``, only the blocks: boundary records are passed over unread (a verifying
    reader's load is then a CRC per block record, not per record), and the first block record
    whose own CRC fails ends the index."""
    if data.startswith(MAGIC_V1):
        index = _decode_v1(data, chunk)
        return index if boundaries else index.without_boundaries()
    if not data.startswith(MAGIC):
        raise InvalidManifestError(key, "not a chunk index (bad magic)")
    length, base = chunk.length, chunk.start_offset
    found: dict[int, int] = {}  # boundary offset -> its (latest) time, chunk-relative
    latest: dict[int, tuple[int, int]] = {}  # block start -> (end, crc), chunk-relative
    view = memoryview(data)
    count = (len(data) - len(MAGIC)) // RECORD_SIZE
    kinds = data[len(MAGIC) :: RECORD_SIZE][:count]  # every record's first byte
    # Without boundaries, only the block records are visited (found by a scan in C): a chunk
    # of small appends has up to 64 boundary records per block at the default sizes.
    wanted = range(count) if boundaries else _positions(kinds, _BLOCK)
    for number in wanted:
        at = len(MAGIC) + number * RECORD_SIZE
        kind, crc, a, b, record_crc = _RECORD.unpack_from(view, at)
        if crc32c(view[at : at + _BODY.size]) != record_crc:
            break  # torn or damaged: nothing after it can be trusted
        if kind == _BOUNDARY and a < length:
            found[a] = b
        elif kind == _BLOCK and a < b <= length:
            latest[a] = (b, crc)
    blocks: list[Block] = []
    position = 0
    while position < length and position in latest:
        end, crc = latest[position]
        blocks.append(Block(base + position, base + end, crc))
        position = end
    entries = tuple(TimeIndexEntry(base + a, found[a]) for a in sorted(found))
    return ChunkIndex(chunk, entries, tuple(blocks))


def _positions(kinds: bytes, kind: int) -> Iterator[int]:
    """The positions in ``kinds`` that hold ``kind``, in order."""
    needle = bytes((kind,))
    at = kinds.find(needle)
    while at >= 0:
        yield at
        at = kinds.find(needle, at + 1)


def _decode_v1(data: bytes, chunk: ChunkInfo) -> ChunkIndex:
    whole = (len(data) - len(MAGIC_V1)) // _V1_ENTRY.size * _V1_ENTRY.size
    entries = []
    for relative, time_ms in _V1_ENTRY.iter_unpack(memoryview(data)[8 : 8 + whole]):
        if relative >= chunk.length:
            break
        entries.append(TimeIndexEntry(chunk.start_offset + relative, time_ms))
    return ChunkIndex(chunk, tuple(entries), (), checksummed=False)


def load_chunk_index(
    storage: ChunkStorage, chunk: ChunkInfo, *, boundaries: bool = True
) -> ChunkIndex:
    """The index of ``chunk`` (as its manifest entry gives it): the one place that finds it,
    in the manifest itself (:attr:`ChunkInfo.index`) or in the object beside the chunk. A
    chunk without one has no boundaries and no checksums (``checksummed`` false). Without
    ``boundaries``: its checksums only (:func:`decode_chunk_index`)."""
    if chunk.index is not None:
        return decode_chunk_index(chunk.key, chunk.index, chunk, boundaries=boundaries)
    key = time_index_key(chunk.key)
    try:
        size = storage.size(key)
        data = storage.read(key, 0, size)
    except ChunkNotFoundError:
        return ChunkIndex(chunk, checksummed=False)
    return decode_chunk_index(key, data, chunk, boundaries=boundaries)


def retimed_inline(chunk: ChunkInfo, time_ms: int) -> bytes:
    """The inline index of ``chunk`` (which must have one) with every boundary at ``time_ms``."""
    assert chunk.index is not None
    return decode_chunk_index(chunk.key, chunk.index, chunk).with_times(time_ms).encode()


def retime_index(storage: ChunkStorage, chunk: ChunkInfo, time_ms: int) -> None:
    """Give every boundary of ``chunk``'s index the time ``time_ms`` (a merge is one append
    to its target), keeping its checksums. Never leaves the chunk without its index, whatever
    fails when: where objects can be appended to, records that supersede the boundaries'
    times are appended; elsewhere the index is replaced whole, atomically (``put_if``).
    Idempotent: run again after a failure, it only supersedes again. (A chunk whose manifest
    keeps its index: :func:`retimed_inline`.)"""
    index = load_chunk_index(storage, chunk)
    if not index.boundaries or not index.checksummed:
        return
    key = index_object_key(chunk)
    if storage.supports_append:
        start = chunk.start_offset
        records = b"".join(_boundary(e.offset - start, time_ms) for e in index.boundaries)
        storage.append(key, storage.size(key), [records])
        return
    found = storage.get(key)
    if found is not None:
        storage.put_if(key, index.with_times(time_ms).encode(), found[1])


def read_time_index(storage: ChunkStorage, chunk: ChunkInfo) -> list[TimeIndexEntry]:
    """The append boundaries (and their times) recorded inside ``chunk``, in offset order."""
    return list(load_chunk_index(storage, chunk).boundaries)


def index_object_key(chunk: ChunkInfo) -> str:
    """Where the index of ``chunk`` is stored, for the writer that creates, grows, rewrites
    and deletes it with the chunk."""
    return time_index_key(chunk.key)


def verify(index: ChunkIndex, segment: str, start: int, data: Buffer) -> None:
    """Check ``data``, the chunk's bytes from segment offset ``start`` (a block start) to a
    block end, against the index; ``ChunkCorruptedError`` naming the first bad block."""
    view = memoryview(data)
    first = bisect_right(index._starts, start) - 1
    end = start + len(view)
    for block in index.blocks[first:]:
        if block.start >= end:
            break
        if crc32c(view[block.start - start : block.end - start]) != block.crc:
            raise ChunkCorruptedError(
                segment, index.chunk.key, block.start, block.end, "its CRC32C does not match"
            )


def read_verified(
    storage: ChunkStorage, index: ChunkIndex, segment: str, low: int, high: int
) -> bytes | memoryview:
    """The chunk's bytes ``[low, high)`` (segment offsets inside it), read whole blocks at a
    time and verified: a view into the blocks read, unless they are exactly the range (no
    copy either way). ``ChunkCorruptedError`` names the first block that is not there whole,
    does not match, or has no checksum; ``ChunkNotFoundError`` if the chunk is gone."""
    chunk = index.chunk
    if high <= low:
        return b""
    span = index.blocks_over(low, high)
    if span is None or not index.checksummed:
        covered = index.covered_to if index.checksummed else chunk.start_offset
        raise ChunkCorruptedError(
            segment, chunk.key, max(low, covered), chunk.end_offset,
            "no checksum covers these bytes (the chunk's index is missing or damaged)",
        )  # fmt: skip
    first, last = index.blocks[span[0]], index.blocks[span[1]]
    try:
        data = storage.read(chunk.key, first.start - chunk.start_offset, last.end - first.start)
    except ChunkRangeError:
        size = storage.size(chunk.key)
        short = bisect_right(index._starts, chunk.start_offset + size) - 1
        block = index.blocks[max(short, span[0])]
        raise ChunkCorruptedError(
            segment, chunk.key, block.start, chunk.end_offset,
            f"the chunk holds {size} of its {chunk.length} bytes",
        ) from None  # fmt: skip
    except ChunkNotFoundError as e:
        raise ChunkNotFoundError(chunk.key, segment) from e
    verify(index, segment, first.start, data)
    if low == first.start and high == last.end:
        return data
    return memoryview(data)[low - first.start : high - first.start]


class ChunkIndexBuilder:
    """Index records for the bytes appended to one new chunk, in the order they are written
    (the Storage Writer's side). Not thread-safe: one writer per chunk."""

    def __init__(self, chunk_start: int, block_bytes: int) -> None:
        if block_bytes < 1:
            raise ValueError(f"block size {block_bytes} must be positive")
        self.chunk_start = chunk_start
        self.block_bytes = block_bytes
        self.size = 0  # chunk bytes indexed so far
        self._block_start = chunk_start  # the last block, which the next bytes may extend
        self._block_crc = 0
        self._begun = False

    def add(self, parts: Sequence[Buffer], entries: Iterable[tuple[int, int]] = ()) -> bytes:
        """The records to add to the index for ``parts``, the chunk's next bytes, and the
        boundaries ``entries`` (``(segment offset, time_ms)`` pairs inside them); the first
        call's include the index's magic."""
        chunk_start, block = self.chunk_start, self.block_bytes
        records = [] if self._begun else [MAGIC]
        self._begun = True
        records += [_boundary(offset - chunk_start, time_ms) for offset, time_ms in entries]
        position = chunk_start + self.size
        for part in parts:
            view = memoryview(part).cast("B")
            done = 0
            while done < len(view):
                boundary = (position // block + 1) * block
                take = min(len(view) - done, boundary - position)
                self._block_crc = crc32c(view[done : done + take], self._block_crc)
                done += take
                position += take
                if position == boundary:
                    records.append(self._record(position))
                    self._block_start, self._block_crc = position, 0
        if position > self._block_start:
            records.append(self._record(position))  # the last block so far, maybe extended
        self.size = position - chunk_start
        return b"".join(records)

    def _record(self, end: int) -> bytes:
        return _block(self._block_start - self.chunk_start, end - self.chunk_start, self._block_crc)
