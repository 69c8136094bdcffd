"""Keys derived from segment names: no name addresses anything outside its own keys, manifest
keys sort and select by prefix as the names do, and chunks spread over a fixed set of
directories."""

from __future__ import annotations

import hashlib
import random
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
from segmentstore.tier2.layout import manifests_under, name_of

CHUNK_KEY = re.compile(r"chunks/([0-9a-f]{2})/\1[0-9a-f]{30}-\d{20}-e\d{10}-s\d{10}")
# Names of the segment name alphabet that try to step out of their keys.
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
    "names/x.m",
    "chunks/00/x",
    "~user/x",
    "_",
    "-",
]
ALPHABET = "#-./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz~"


@pytest.mark.parametrize("name", HOSTILE_NAMES, ids=range(len(HOSTILE_NAMES)))
def test_every_name_maps_to_keys_of_its_own(name: str) -> None:
    manifest = manifest_key(name)
    assert manifest.startswith("names/") and manifest.endswith(".m")
    assert name_of(manifest) == name
    chunk = chunk_key(name, 1234, 7, 3)
    assert CHUNK_KEY.fullmatch(chunk), chunk
    assert chunk.endswith("-00000000000000001234-e0000000007-s0000000003")
    assert time_index_key(chunk) == chunk + ".tidx"
    for key in (manifest, chunk, time_index_key(chunk)):
        assert check_key(key) == key
        assert ".." not in key.split("/")


def test_characters_no_segment_name_has_are_refused() -> None:
    for name in ("name\x00with\nbytes", "ünïcödé/名前", "a b", "a:b"):
        with pytest.raises(ValueError):
            manifest_key(name)


def test_manifest_keys_sort_and_select_by_prefix_as_the_names_do() -> None:
    rng = random.Random(35)
    names = {"".join(rng.choices(ALPHABET, k=rng.randint(1, 9))) for _ in range(3000)}
    names |= {"a", "a-", "a.", "a/", "a/b", "ab", "a~", "a#"}
    by_key = sorted(names, key=manifest_key)
    assert by_key == sorted(names)  # code point order
    for prefix in ("", "a", "a/", "1", "~", "Zz", "a#"):
        under = manifests_under(prefix)
        selected = {n for n in names if manifest_key(n).startswith(under)}
        assert selected == {n for n in names if n.startswith(prefix)}, prefix


def test_non_manifest_keys_have_no_name() -> None:
    for key in ("names/1a", "names/1a1b/1c.x", "names/1a/1b.m", "chunks/ab/x.m", "names/.m"):
        assert name_of(key) is None, key


def test_the_hash_is_sha256_of_the_utf8_name() -> None:
    name = "scope/stream/0"
    assert segment_key(name) == hashlib.sha256(name.encode()).hexdigest()[:32]
    assert segment_key("a") == "ca978112ca1bbdcafac231b39a23dc4d"
    assert chunk_key("a", 0, 1).startswith("chunks/ca/ca978112ca1bbdcafac231b39a23dc4d-")


def test_names_do_not_share_keys() -> None:
    names = [*HOSTILE_NAMES, "scope/stream/0", "scope/stream/0#transaction.1"]
    assert len({segment_key(n) for n in names}) == len(names)
    assert len({manifest_key(n) for n in names}) == len(names)


def test_chunk_keys_sort_by_start_offset() -> None:
    offsets = [0, 9, 10, 99, 100, 4096, 10**12, 10**20 - 1]
    keys = [chunk_key("s", offset, 1) for offset in offsets]
    assert sorted(keys) == keys


def test_out_of_range_arguments_are_refused() -> None:
    calls: list[Callable[[], str]] = [
        lambda: segment_key(""),
        lambda: manifest_key(""),
        lambda: chunk_key("s", -1, 0),
        lambda: chunk_key("s", 10**20, 0),
        lambda: chunk_key("s", 0, -1),
        lambda: chunk_key("s", 0, 10**10),
        lambda: chunk_key("s", 0, 0, -1),
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
    assert sorted(p.name for p in root.iterdir() if p.name != ".locks") == ["chunks", "names"]
    assert sorted(storage.list("names/"), key=name_of) == sorted(map(manifest_key, HOSTILE_NAMES))
    for path in root.rglob("*"):
        assert path.resolve().is_relative_to(root.resolve())
