"""A small segment costs two Tier 2 objects, its chunk and its manifest: the manifest keeps the
index (checksums and time index) of the segment's last chunk while it is small, and moves it
to an object of its own when it grows, when a later chunk follows, or when a merge adopts it.
Every byte stays verified either way."""

from __future__ import annotations

import time
from pathlib import Path

from store_checks import flush, read_all

from segmentstore import SegmentStore
from segmentstore.tier2 import ManifestStore, SegmentReader, open_chunk_storage
from segmentstore.tier2.chunk_index import INLINE_INDEX_BYTES, index_object_key

from .writer_harness import MANUAL, tier2_files


def manifest_of(data: Path, name: str):  # type: ignore[no-untyped-def]
    storage = open_chunk_storage((data / "tier2").as_uri())
    try:
        loaded = ManifestStore(storage).load(name)
        assert loaded is not None
        return loaded[0]
    finally:
        storage.close()


def objects(data: Path) -> list[str]:
    return [f for f in tier2_files(data) if not f.startswith(".locks/")]


async def test_a_small_segment_is_its_chunk_and_its_manifest(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with SegmentStore.open(data, containers=1, storage_writer=MANUAL) as store:
        await store.create_segment("tiny")
        await store.append("tiny", b"x" * 100)
        await flush(store)
        await store.append("tiny", b"y" * 100)  # the same chunk grows, its index inline still
        await flush(store)
    manifest = manifest_of(data, "tiny")
    (chunk,) = manifest.chunks
    assert chunk.index is not None and len(chunk.index) <= INLINE_INDEX_BYTES
    assert len(objects(data)) == 2, objects(data)
    storage = open_chunk_storage((data / "tier2").as_uri())
    try:
        assert SegmentReader(storage).read("tiny", 0, 200) == b"x" * 100 + b"y" * 100
        assert not storage.exists(index_object_key(chunk))
    finally:
        storage.close()


async def test_an_index_that_grows_moves_to_an_object_of_its_own(tmp_path: Path) -> None:
    data = tmp_path / "data"
    expected = bytearray()
    settings = {"storage_writer": MANUAL, "store": {"time_index_interval_bytes": 16}}
    async with SegmentStore.open(data, containers=1, **settings) as store:
        await store.create_segment("grows")
        for i in range(60):  # a boundary record per append: past the inline size
            payload = f"append {i:03d};".encode()
            await store.append("grows", payload)
            expected += payload
            if i % 10 == 9:
                await flush(store)
    manifest = manifest_of(data, "grows")
    (chunk,) = manifest.chunks
    assert chunk.index is None
    assert index_object_key(chunk) in objects(data)
    async with SegmentStore.open(data, containers=1, **settings) as store:
        assert await read_all(store, "grows") == expected
        assert await store.offset_at("grows", int(time.time() * 1000) + 1000) == len(expected)


async def test_a_merged_transaction_leaves_its_index_beside_its_chunk(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with SegmentStore.open(data, containers=1, storage_writer=MANUAL) as store:
        await store.create_segment("target")
        await store.append("target", b"t" * 50)
        txn = await store.begin_transaction("target")
        await store.append(txn, b"x" * 70)
        await flush(store)  # both have one chunk, each index in its manifest
        assert manifest_of(data, txn).chunks[0].index is not None
        merged_at = int(time.time() * 1000)
        await store.merge("target", txn)
        await flush(store)
        assert await read_all(store, "target") == b"t" * 50 + b"x" * 70
    manifest = manifest_of(data, "target")
    assert [c.index is None for c in manifest.chunks] == [True, True]  # none is last and new
    for chunk in manifest.chunks:
        assert index_object_key(chunk) in objects(data)
    async with SegmentStore.open(data, containers=1, storage_writer=MANUAL) as store:
        assert await read_all(store, "target") == b"t" * 50 + b"x" * 70
        # The adopted chunk's boundary carries the merge's time: the bytes count as appended then.
        assert await store.offset_at("target", merged_at) in (0, 50)
