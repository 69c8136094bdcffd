"""A chunk's index (tier2.chunk_index): the checksums and boundaries the writer records, read
back as the manifest's chunk entry bounds them, and the verified reads that refuse damage."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from fault_injection import FaultInjector
from flaky_tier2 import FlakyChunkStorage
from memory_tier2 import InMemoryTier2

from segmentstore.tier2 import (
    ChunkCorruptedError,
    ChunkIndexBuilder,
    ChunkInfo,
    InvalidManifestError,
    Tier2Error,
    TimeIndexEntry,
    load_chunk_index,
    open_chunk_storage,
    read_time_index,
    read_verified,
)
from segmentstore.tier2.chunk_index import (
    MAGIC_V1,
    RECORD_SIZE,
    decode_chunk_index,
    index_object_key,
    retime_index,
)
from segmentstore.tier2.chunk_storage import ChunkStorage

BLOCK = 1024
KEY = "segments/x/chunk-1"


def _write(
    storage: ChunkStorage, start: int, writes: list[bytes], entries: list[list[int]]
) -> ChunkInfo:
    """A chunk made by appends of ``writes`` (each with its boundaries), as the writer does."""
    builder = ChunkIndexBuilder(start, BLOCK)
    index = b"".join(
        builder.add([w], [(o, o) for o in e]) for w, e in zip(writes, entries, strict=True)
    )
    data = b"".join(writes)
    storage.create(KEY, [data])
    chunk = ChunkInfo(KEY, start, len(data))
    storage.create(index_object_key(chunk), [index])
    return chunk


@pytest.fixture
def storage(tmp_path: Path) -> ChunkStorage:
    return open_chunk_storage(tmp_path.as_uri())


def test_blocks_are_cut_at_aligned_segment_offsets_and_verify(storage: ChunkStorage) -> None:
    rng = random.Random(1)
    writes = [rng.randbytes(n) for n in (100, 1500, 7, 3000)]  # appends end mid-block
    chunk = _write(storage, 1000, writes, [[1000], [1100, 2000], [], [2607]])
    data = b"".join(writes)
    index = load_chunk_index(storage, chunk)
    assert index.checksummed and index.covered_to == chunk.end_offset
    assert [b.start for b in index.blocks] == [1000, 1024, 2048, 3072, 4096, 5120]
    assert [e.offset for e in index.boundaries] == [1000, 1100, 2000, 2607]
    for low, high in [(1000, 1001), (1010, 2500), (3071, 3072), (1000, chunk.end_offset)]:
        assert read_verified(storage, index, "s", low, high) == data[low - 1000 : high - 1000]


def test_a_flipped_byte_is_an_error_naming_segment_chunk_and_block(storage: ChunkStorage) -> None:
    writes = [bytes(range(256)) * 12]
    chunk = _write(storage, 0, writes, [[0]])
    damaged = bytearray(writes[0])
    damaged[1500] ^= 0x01
    storage.delete(KEY)
    storage.create(KEY, [bytes(damaged)])
    index = load_chunk_index(storage, chunk)
    assert read_verified(storage, index, "s", 0, 1024) == writes[0][:1024]  # the block before
    with pytest.raises(ChunkCorruptedError) as caught:
        read_verified(storage, index, "s", 1020, 1030)
    error = caught.value
    assert (error.segment, error.chunk, error.start, error.end) == ("s", KEY, 1024, 2048)
    assert "[1024, 2048)" in str(error) and "'s'" in str(error) and KEY in str(error)


def test_a_short_chunk_is_damage_from_its_first_incomplete_block(storage: ChunkStorage) -> None:
    writes = [b"x" * 3000]
    chunk = _write(storage, 0, writes, [[0]])
    storage.delete(KEY)
    storage.create(KEY, [b"x" * 1999])  # cut short by 1,001 bytes
    index = load_chunk_index(storage, chunk)
    assert read_verified(storage, index, "s", 0, 1024) == b"x" * 1024
    with pytest.raises(ChunkCorruptedError) as caught:
        read_verified(storage, index, "s", 500, 2500)
    assert (caught.value.start, caught.value.end) == (1024, 3000)


def test_the_manifest_bounds_the_index_and_later_records_supersede(storage: ChunkStorage) -> None:
    builder = ChunkIndexBuilder(0, BLOCK)
    first = builder.add([b"a" * 600], [(0, 5)])
    second = builder.add([b"b" * 600], [(600, 6)])  # extends block [0, 600) to [0, 1024)
    storage.create(KEY, [b"a" * 600 + b"b" * 600])
    storage.create(index_object_key(ChunkInfo(KEY, 0, 0)), [first + second + b"torn"])
    # The manifest names only the first write (its save for the second never happened).
    short = load_chunk_index(storage, ChunkInfo(KEY, 0, 600))
    assert [(b.start, b.end) for b in short.blocks] == [(0, 600)]
    assert short.boundaries == (TimeIndexEntry(0, 5),)
    assert read_verified(storage, short, "s", 0, 600) == b"a" * 600
    whole = load_chunk_index(storage, ChunkInfo(KEY, 0, 1200))
    assert [(b.start, b.end) for b in whole.blocks] == [(0, 1024), (1024, 1200)]
    # A chunk adopted at another offset (a merge) keeps its index: it is relative.
    moved = load_chunk_index(storage, ChunkInfo(KEY, 7000, 1200))
    assert [e.offset for e in moved.boundaries] == [7000, 7600]
    assert read_verified(storage, moved, "t", 7000, 8200) == b"a" * 600 + b"b" * 600


def test_a_damaged_record_ends_the_index_and_what_it_covered_is_unverifiable(
    storage: ChunkStorage,
) -> None:
    chunk = _write(storage, 0, [b"y" * 3000], [[0]])
    key = index_object_key(chunk)
    data = bytearray(storage.read(key, 0, storage.size(key)))
    data[8 + 2 * RECORD_SIZE + 9] ^= 0xFF  # the record of the second block
    storage.delete(key)
    storage.create(key, [bytes(data)])
    index = load_chunk_index(storage, chunk)
    assert index.covered_to == 1024
    assert read_verified(storage, index, "s", 0, 1024) == b"y" * 1024
    with pytest.raises(ChunkCorruptedError, match="no checksum covers"):
        read_verified(storage, index, "s", 1000, 1100)


def test_chunks_without_checksums_are_refused_but_keep_their_boundaries(
    storage: ChunkStorage,
) -> None:
    storage.create(KEY, [b"z" * 100])
    chunk = ChunkInfo(KEY, 0, 100)
    none = load_chunk_index(storage, chunk)  # no index object at all
    assert not none.checksummed and none.boundaries == ()
    with pytest.raises(ChunkCorruptedError):
        read_verified(storage, none, "s", 0, 10)
    old = MAGIC_V1 + (0).to_bytes(8, "little") + (9).to_bytes(8, "little")  # the first format
    storage.create(index_object_key(chunk), [old])
    assert read_time_index(storage, chunk) == [TimeIndexEntry(0, 9)]
    assert not load_chunk_index(storage, chunk).checksummed
    with pytest.raises(InvalidManifestError):
        decode_chunk_index("k", b"not an index", chunk)


def test_a_verifying_load_reads_the_blocks_alone(storage: ChunkStorage) -> None:
    chunk = _write(storage, 0, [b"w" * 2500], [[0, 1000, 2000]])
    key = index_object_key(chunk)
    data = bytearray(storage.read(key, 0, storage.size(key)))
    data[8 + RECORD_SIZE + 12] ^= 0xFF  # the second boundary record
    storage.delete(key)
    storage.create(key, [bytes(data)])
    whole = load_chunk_index(storage, chunk)
    assert [e.offset for e in whole.boundaries] == [0] and whole.covered_to == 0  # it stops
    blocks = load_chunk_index(storage, chunk, boundaries=False)
    assert blocks.boundaries == () and blocks.covered_to == chunk.end_offset
    assert read_verified(storage, blocks, "s", 0, 2500) == b"w" * 2500


@pytest.mark.parametrize("appends", [True, False], ids=["appendable", "whole-objects"])
def test_a_merge_retimes_boundaries_and_keeps_the_checksums(appends: bool) -> None:
    """What a merge does to each chunk it adopts: every boundary gets the merge's time, the
    checksums stay, and a failure midway leaves the old index, never none."""
    storage = InMemoryTier2().client(supports_append=appends)
    chunk = _write(storage, 0, [b"m" * 3000], [[0, 1200, 2400]])
    before = load_chunk_index(storage, chunk)
    retime_index(storage, chunk, 77)
    after = load_chunk_index(storage, chunk)
    assert after.boundaries == tuple(TimeIndexEntry(o, 77) for o in (0, 1200, 2400))
    assert after.blocks == before.blocks
    retime_index(storage, chunk, 77)  # idempotent
    assert load_chunk_index(storage, chunk) == after
    flaky = FlakyChunkStorage(storage, FaultInjector(0))
    flaky.injector.add("append" if appends else "put_if", "fail")
    with pytest.raises(Tier2Error):
        retime_index(flaky, chunk, 99)
    assert load_chunk_index(storage, chunk) == after
