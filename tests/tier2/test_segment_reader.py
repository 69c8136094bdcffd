"""Reading segments through their manifests alone, on every backend."""

from __future__ import annotations

from dataclasses import replace

import pytest
from chunk_indexes import write_index

from segmentstore.tier2 import (
    ChunkInfo,
    ChunkNotFoundError,
    ChunkStorage,
    ManifestNotFoundError,
    ManifestStore,
    SegmentManifest,
    SegmentReader,
    chunk_key,
)

NAME = "scope/stream/0"


def segment_bytes(length: int) -> bytes:
    return bytes(i * 7 % 251 for i in range(length))


def write_segment(
    storage: ChunkStorage, name: str, sizes: list[int], *, epoch: int = 1, start_offset: int = 0
) -> tuple[SegmentManifest, bytes]:
    """Chunks of ``sizes`` holding ``segment_bytes``, and their manifest, saved."""
    data = segment_bytes(sum(sizes))
    chunks = []
    offset = 0
    for size in sizes:
        key = chunk_key(name, offset, epoch)
        if storage.supports_append and size > 1:  # grown like the Storage Writer grows chunks
            storage.create(key, [data[offset : offset + 1]])
            storage.append(key, 1, [data[offset + 1 : offset + size]])
        else:
            storage.create(key, [data[offset : offset + size]])
        chunks.append(ChunkInfo(key, offset, size))
        write_index(storage, chunks[-1], data[offset : offset + size])
        offset += size
    manifest = SegmentManifest(
        name=name,
        chunks=tuple(chunks),
        storage_length=offset,
        start_offset=start_offset,
        sealed=False,
        owner_epoch=epoch,
        version=0,
    )
    ManifestStore(storage).save(manifest, None, epoch)
    return replace(manifest, version=1), data


def test_reads_across_chunks(storage: ChunkStorage) -> None:
    _, data = write_segment(storage, NAME, [100, 1, 250, 49])
    reader = SegmentReader(storage)
    assert reader.read(NAME, 0, 400) == data
    for offset, length in ((0, 100), (99, 2), (95, 300), (100, 1), (101, 250), (350, 50)):
        assert reader.read(NAME, offset, length) == data[offset : offset + length]


def test_an_empty_chunk_is_skipped(storage: ChunkStorage) -> None:
    data = segment_bytes(150)
    keys = [chunk_key(NAME, 0, 1), chunk_key(NAME, 100, 2), chunk_key(NAME, 100, 3)]
    storage.create(keys[0], [data[:100]])
    storage.create(keys[1], [])
    storage.create(keys[2], [data[100:]])
    chunks = (ChunkInfo(keys[0], 0, 100), ChunkInfo(keys[1], 100, 0), ChunkInfo(keys[2], 100, 50))
    for chunk in chunks:
        write_index(storage, chunk, data[chunk.start_offset : chunk.end_offset])
    manifest = SegmentManifest(NAME, chunks, 150, 0, False, 3, 0)
    ManifestStore(storage).save(manifest, None, epoch=3)
    reader = SegmentReader(storage)
    assert reader.read(NAME, 0, 150) == data
    assert reader.read(NAME, 100, 10) == data[100:110]


def test_reads_are_clamped_to_what_tier2_holds(storage: ChunkStorage) -> None:
    _, data = write_segment(storage, NAME, [100, 100])
    reader = SegmentReader(storage)
    assert reader.read(NAME, 150, 1000) == data[150:]
    assert reader.read(NAME, 200, 10) == b""
    assert reader.read(NAME, 5000, 10) == b""
    assert reader.read(NAME, 10, 0) == b""


def test_a_truncated_segment_reads_from_its_start_offset(storage: ChunkStorage) -> None:
    manifest, data = write_segment(storage, NAME, [100, 100, 100])
    store = ManifestStore(storage)
    loaded = store.load(NAME)
    assert loaded is not None
    # Truncated at 150: the first chunk is dropped from the manifest and then deleted.
    truncated = replace(manifest, start_offset=150, chunks=manifest.chunks[1:])
    store.save(truncated, loaded[1], epoch=1)
    storage.delete(manifest.chunks[0].key)
    reader = SegmentReader(storage)
    assert reader.read(NAME, 0, 1000) == data[150:]
    assert reader.read(NAME, 0, 160) == data[150:160]
    assert reader.read(NAME, 149, 3) == data[150:152]


def test_a_missing_chunk_is_an_error_that_names_it(storage: ChunkStorage) -> None:
    manifest, data = write_segment(storage, NAME, [100, 100, 100])
    storage.delete(manifest.chunks[1].key)
    reader = SegmentReader(storage)
    assert reader.read(NAME, 0, 100) == data[:100]  # other chunks still read
    with pytest.raises(ChunkNotFoundError) as caught:
        reader.read(NAME, 50, 100)
    assert caught.value.key == manifest.chunks[1].key
    assert caught.value.segment == NAME
    assert manifest.chunks[1].key in str(caught.value) and NAME in str(caught.value)


def test_a_segment_without_manifest(storage: ChunkStorage) -> None:
    storage.create(chunk_key(NAME, 0, 1), [b"a chunk nobody names"])
    with pytest.raises(ManifestNotFoundError) as caught:
        SegmentReader(storage).read(NAME, 0, 10)
    assert caught.value.segment == NAME


def test_a_held_manifest_is_a_snapshot(storage: ChunkStorage) -> None:
    manifest, data = write_segment(storage, NAME, [100])
    reader = SegmentReader(storage)
    # The segment grows by a chunk; the old manifest still reads exactly what it named.
    loaded = ManifestStore(storage).load(NAME)
    assert loaded is not None
    key = chunk_key(NAME, 100, 1)
    storage.create(key, [b"z" * 50])
    write_index(storage, ChunkInfo(key, 100, 50), b"z" * 50)
    grown = replace(
        manifest, chunks=(*manifest.chunks, ChunkInfo(key, 100, 50)), storage_length=150
    )
    ManifestStore(storage).save(grown, loaded[1], epoch=1)
    assert reader.read_from(manifest, 0, 1000) == data
    assert reader.read(NAME, 0, 1000) == data + b"z" * 50


def test_list_segments(storage: ChunkStorage) -> None:
    names = ["scope/stream/1", "scope/stream/0", "scope/stream/0#transaction.1", "other/s/0", "a"]
    for name in names:
        write_segment(storage, name, [10])
    storage.create("segments/not-a-manifest", [b"x"])
    storage.create("elsewhere/manifest.json", [b"x"])
    reader = SegmentReader(storage)
    listed = reader.list_segments()
    assert [m.name for m in listed] == sorted(names)
    assert all(m.storage_length == 10 and m.version == 1 for m in listed)
    assert [m.name for m in reader.list_segments("scope/stream/0")] == [
        "scope/stream/0",
        "scope/stream/0#transaction.1",
    ]
    assert reader.list_segments("nothing") == []
    ManifestStore(storage).delete("a")
    assert [m.name for m in reader.list_segments()] == sorted(names)[1:]
