"""Manifests: the JSON document, its invariants, and saving them with fencing and conditions."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from segmentstore.tier2 import (
    ChunkInfo,
    ChunkStorage,
    FencedError,
    FileChunkStorage,
    InvalidManifestError,
    ManifestConflictError,
    ManifestStore,
    SegmentManifest,
    SegmentState,
    chunk_key,
    manifest_key,
)

NAME = "scope/stream/0"


def manifest(
    chunks: Sequence[tuple[int, int]] = ((0, 100), (100, 50)),
    *,
    start_offset: int = 0,
    storage_length: int | None = None,
    name: str = NAME,
    **fields: Any,
) -> SegmentManifest:
    infos = tuple(
        ChunkInfo(chunk_key(name, start, epoch), start, length)
        for epoch, (start, length) in enumerate(chunks, 1)
    )
    end = infos[-1].end_offset if infos else start_offset
    values: dict[str, Any] = {"sealed": False, "owner_epoch": 1, "version": 1, **fields}
    return SegmentManifest(
        name=name,
        chunks=infos,
        storage_length=end if storage_length is None else storage_length,
        start_offset=start_offset,
        **values,
    )


def document(m: SegmentManifest, **changes: Any) -> bytes:
    data = json.loads(m.to_json())
    data.update(changes)
    return json.dumps(data).encode()


class TestDocument:
    def test_round_trip(self) -> None:
        for m in (
            manifest(),
            manifest((), name="#transaction.x", sealed=True, owner_epoch=9, version=12),
            manifest(((100, 50), (150, 0), (150, 7)), start_offset=120),
            manifest((), start_offset=77),
        ):
            assert SegmentManifest.from_json(m.to_json()) == m

    def test_the_document_is_compact_json_with_every_field(self) -> None:
        data = json.loads(manifest(sealed=True).to_json())
        assert data == {
            "format_version": 2,
            "name": NAME,
            "segment_id": 0,
            "version": 1,
            "owner_epoch": 1,
            "start_offset": 0,
            "storage_length": 150,
            "sealed": True,
            "chunks": [
                {"key": chunk_key(NAME, 0, 1), "start_offset": 0, "length": 100},
                {"key": chunk_key(NAME, 100, 2), "start_offset": 100, "length": 50},
            ],
            "state": None,
        }
        assert b" " not in manifest().to_json()

    @pytest.mark.parametrize(
        "build",
        [
            lambda: manifest(((0, 100), (110, 50))),  # a gap
            lambda: manifest(((0, 100), (90, 50))),  # an overlap
            lambda: manifest(((100, 50), (0, 100))),  # out of order
            lambda: manifest(storage_length=200),  # the last chunk ends early
            lambda: manifest(storage_length=120),  # ... or late
            lambda: manifest((), start_offset=0, storage_length=10),  # bytes with no chunk
            lambda: manifest(((50, 100),), start_offset=20),  # the first chunk starts too high
            lambda: manifest(start_offset=151, storage_length=150),
            lambda: manifest(owner_epoch=-1),
            lambda: manifest(version=True),
            lambda: manifest(sealed=1),
            lambda: replace(manifest(), name=""),
            lambda: manifest(format_version=1),
            lambda: manifest(state=SegmentState(length=149, created_ms=0, last_modified_ms=0)),
        ],
        ids=lambda _: "",
    )
    def test_broken_invariants_are_refused(self, build: Callable[[], SegmentManifest]) -> None:
        with pytest.raises(InvalidManifestError):
            build()

    def test_bad_chunks_are_refused(self) -> None:
        good = manifest()
        for chunks in (
            (ChunkInfo("../escape", 0, 150),),
            (ChunkInfo("k", 0, 100), ChunkInfo("k", 100, 50)),
            (ChunkInfo("k", 0, -1), ChunkInfo("k2", -1, 151)),
        ):
            with pytest.raises(InvalidManifestError):
                replace(good, chunks=chunks)

    @pytest.mark.parametrize(
        "data",
        [
            b"",
            b"not json",
            b"\xff\xfe",
            b"[]",
            b'"manifest"',
            document(manifest(), format_version=1),
            document(manifest(), state={"length": 150}),
            document(manifest(), extra="field"),
            document(manifest(), chunks={}),
            document(manifest(), chunks=[[]]),
            document(manifest(), chunks=[{"key": "k", "start_offset": 0}]),
            document(manifest(), storage_length="150"),
            document(manifest(), storage_length=1.5e2),
            document(manifest(), sealed=None),
        ],
        ids=lambda _: "",
    )
    def test_bad_documents_are_refused(self, data: bytes) -> None:
        with pytest.raises(InvalidManifestError):
            SegmentManifest.from_json(data)

    def test_a_missing_field_is_named(self) -> None:
        data = json.loads(manifest().to_json())
        del data["owner_epoch"]
        with pytest.raises(InvalidManifestError, match="owner_epoch"):
            SegmentManifest.from_json(json.dumps(data).encode())


class TestManifestStore:
    def test_load_of_a_segment_without_manifest(self, storage: ChunkStorage) -> None:
        assert ManifestStore(storage).load(NAME) is None

    def test_save_stamps_epoch_and_version(self, storage: ChunkStorage) -> None:
        store = ManifestStore(storage)
        first = store.save(manifest(owner_epoch=0, version=0), None, epoch=3)
        loaded = store.load(NAME)
        assert loaded == (manifest(owner_epoch=3, version=1), first)
        chunks = (*loaded[0].chunks, ChunkInfo("k", 150, 10))
        grown = replace(loaded[0], chunks=chunks, storage_length=160, sealed=True)
        second = store.save(grown, first, epoch=3)
        assert store.load(NAME) == (replace(grown, version=2), second)

    def test_save_is_conditional(self, storage: ChunkStorage) -> None:
        store = ManifestStore(storage)
        token = store.save(manifest(), None, epoch=1)
        with pytest.raises(ManifestConflictError):
            store.save(manifest(), None, epoch=1)  # it exists now
        newer = store.save(manifest(sealed=True), token, epoch=1)
        with pytest.raises(ManifestConflictError):
            store.save(manifest(version=5), token, epoch=1)  # stale token
        assert store.load(NAME) == (manifest(sealed=True, version=2), newer)

    def test_a_lower_epoch_is_fenced_out(self, storage: ChunkStorage) -> None:
        store = ManifestStore(storage)
        old_owner_token = store.save(manifest(), None, epoch=4)
        new_owner_token = store.save(manifest(sealed=True), old_owner_token, epoch=5)
        for token in (old_owner_token, new_owner_token, None):
            with pytest.raises(FencedError) as caught:
                store.save(manifest(), token, epoch=4)
            assert (caught.value.segment, caught.value.epoch, caught.value.owner_epoch) == (
                NAME,
                4,
                5,
            )
        assert store.load(NAME) == (
            manifest(sealed=True, owner_epoch=5, version=2),
            new_owner_token,
        )
        store.save(manifest(), new_owner_token, epoch=6)  # a newer owner takes over

    def test_delete(self, storage: ChunkStorage) -> None:
        store = ManifestStore(storage)
        store.save(manifest(), None, epoch=1)
        store.delete(NAME)
        store.delete(NAME)
        assert store.load(NAME) is None
        store.save(manifest(), None, epoch=1)  # created again from scratch
        assert store.load(NAME) is not None

    def test_a_manifest_under_another_segments_key_is_refused(self, storage: ChunkStorage) -> None:
        storage.put_if(manifest_key("other"), manifest().to_json(), None)
        with pytest.raises(InvalidManifestError) as caught:
            ManifestStore(storage).load("other")
        assert caught.value.key == manifest_key("other")

    def test_a_corrupt_manifest_names_its_key(self, storage: ChunkStorage) -> None:
        storage.put_if(manifest_key(NAME), b'{"format_version": 1', None)
        with pytest.raises(InvalidManifestError) as caught:
            ManifestStore(storage).load(NAME)
        assert caught.value.key == manifest_key(NAME)


class _TakeoverBeforePut(FileChunkStorage):
    """A file storage in which, once armed, a newer owner saves the manifest just before the next
    ``put_if``: the race between the fencing check and the conditional write."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.armed = False

    def put_if(self, key: str, data: bytes, expected_version: str | None) -> str:
        if self.armed:
            self.armed = False
            found = self.get(key)
            assert found is not None
            newer = replace(SegmentManifest.from_json(found[0]), owner_epoch=9)
            super().put_if(key, newer.to_json(), found[1])
        return super().put_if(key, data, expected_version)


def test_a_takeover_that_wins_the_race_still_fences(tmp_path: Path) -> None:
    storage = _TakeoverBeforePut(tmp_path)
    store = ManifestStore(storage)
    token = store.save(manifest(), None, epoch=2)
    storage.armed = True
    with pytest.raises(FencedError) as caught:
        store.save(manifest(sealed=True), token, epoch=2)
    assert isinstance(caught.value.__cause__, ManifestConflictError)
    assert caught.value.owner_epoch == 9
