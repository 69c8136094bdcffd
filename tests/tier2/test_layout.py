"""Keys derived from segment names: no name addresses anything outside its own prefix."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from segmentstore.tier2 import (
    FileChunkStorage,
    chunk_key,
    manifest_key,
    segment_key,
    time_index_key,
)
from segmentstore.tier2.chunk_storage import check_key

SEGMENT_KEY = re.compile(r"segments/[0-9a-f]{32}")
HOSTILE_NAMES = [
    "../x",
    "a/../../etc",
    "../../../../etc/passwd",
    "/abs/path",
    "a" * 255,
    "scope/stream/0#transaction.00000000000000000000000000000001",
    "#transaction.",
    ".",
    "..",
    "a/./b",
    "segments/x/manifest.json",
    "~user/x",
    "name\x00with\nbytes",
    "ünïcödé/名前",
]


@pytest.mark.parametrize("name", HOSTILE_NAMES, ids=range(len(HOSTILE_NAMES)))
def test_every_name_maps_under_its_own_fixed_length_prefix(name: str) -> None:
    prefix = segment_key(name)
    assert SEGMENT_KEY.fullmatch(prefix)
    assert manifest_key(name) == f"{prefix}/manifest.json"
    chunk = chunk_key(name, 1234, 7)
    assert chunk == f"{prefix}/chunk-00000000000000001234-e0000000007"
    assert time_index_key(chunk) == chunk + ".tidx"
    for key in (manifest_key(name), chunk, time_index_key(chunk)):
        assert check_key(key) == key


def test_the_hash_is_sha256_of_the_utf8_name() -> None:
    name = "scope/stream/0"
    assert segment_key(name) == "segments/" + hashlib.sha256(name.encode()).hexdigest()[:32]
    assert segment_key("a") == "segments/ca978112ca1bbdcafac231b39a23dc4d"


def test_names_do_not_share_prefixes() -> None:
    names = [*HOSTILE_NAMES, "scope/stream/0", "scope/stream/0#transaction.1"]
    assert len({segment_key(n) for n in names}) == len(names)


def test_chunk_keys_sort_by_start_offset() -> None:
    offsets = [0, 9, 10, 99, 100, 4096, 10**12, 10**20 - 1]
    keys = [chunk_key("s", offset, 1) for offset in offsets]
    assert sorted(keys) == keys


def test_out_of_range_arguments_are_refused() -> None:
    calls: list[Callable[[], str]] = [
        lambda: segment_key(""),
        lambda: chunk_key("s", -1, 0),
        lambda: chunk_key("s", 10**20, 0),
        lambda: chunk_key("s", 0, -1),
        lambda: chunk_key("s", 0, 10**10),
    ]
    for call in calls:
        with pytest.raises(ValueError):
            call()


def test_hostile_names_stay_inside_the_storage_root(tmp_path: Path) -> None:
    root = tmp_path / "tier2"
    storage = FileChunkStorage(root)
    for name in HOSTILE_NAMES:
        storage.create(chunk_key(name, 0, 1), [name.encode()])
        storage.put_if(manifest_key(name), b"{}", None)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tier2"]
    directories = [p for p in (root / "segments").iterdir()]
    assert len(directories) == len(HOSTILE_NAMES)
    assert all(len(p.name) == 32 for p in directories)
    for path in root.rglob("*"):
        assert path.resolve().is_relative_to(root.resolve())
