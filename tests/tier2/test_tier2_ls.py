"""``segmentstore tier2 ls`` over damaged or mistyped locations: a location that does not exist
is an error (and is not created), a prefix that matches nothing a warning, and a damaged
manifest is reported (exit status 1) without hiding the other segments or failing listings of
prefixes it does not belong to."""

from __future__ import annotations

from pathlib import Path

import pytest

from segmentstore.cli import main
from segmentstore.tier2 import (
    ChunkInfo,
    ManifestStore,
    SegmentManifest,
    chunk_key,
    manifest_key,
    open_chunk_storage,
)


def segment(storage_uri: str, name: str) -> None:
    storage = open_chunk_storage(storage_uri)
    try:
        key = chunk_key(name, 0, 1)
        storage.create(key, [b"0123456789"])
        manifest = SegmentManifest(
            name=name,
            chunks=(ChunkInfo(key, 0, 10),),
            storage_length=10,
            start_offset=0,
            sealed=False,
            owner_epoch=1,
            version=0,
        )
        ManifestStore(storage).save(manifest, None, 1)
    finally:
        storage.close()


def damage(storage_uri: str, name: str, keep_name: bool) -> str:
    storage = open_chunk_storage(storage_uri)
    try:
        key = manifest_key(name)
        found = storage.get(key)
        assert found is not None
        broken = found[0][: len(found[0]) // 2] if keep_name else b"\x00not a manifest"
        storage.put_if(key, broken, found[1])
        return key
    finally:
        storage.close()


def ls(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["tier2", "ls", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_a_location_that_does_not_exist_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "mistyped"
    code, out, err = ls(capsys, missing.as_uri(), "--prefix", "a/")
    assert code == 1 and out == ""
    assert f"there is no directory {missing}" in err
    assert not missing.exists()
    assert main(["tier2", "cat", missing.as_uri(), "a/0"]) == 1
    assert "there is no directory" in capsys.readouterr().err and not missing.exists()


def test_a_prefix_that_matches_nothing_warns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    uri = tmp_path.as_uri()
    code, out, err = ls(capsys, uri, "--prefix", "a/")
    assert code == 0 and "(it holds no segment at all)" in err
    assert out.split() == ["start_offset", "storage_length", "sealed", "name"]
    segment(uri, "a/0")
    code, out, err = ls(capsys, uri, "--prefix", "b/")
    assert "a/0" not in out
    assert code == 0 and "warning: no segment in" in err and "'b/'" in err
    assert "no segment at all" not in err


def test_a_damaged_manifest_is_reported_only_where_it_belongs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    uri = tmp_path.as_uri()
    for name in ("a/0", "a/1", "b/0", "c/0"):
        segment(uri, name)
    b_key = damage(uri, "b/0", keep_name=True)
    code, out, err = ls(capsys, uri, "--prefix", "a/")
    assert code == 0 and "a/0" in out and "a/1" in out and err == ""
    code, out, err = ls(capsys, uri)
    assert code == 1
    assert "a/0" in out and "c/0" in out and "b/0" not in out
    assert f"the manifest {b_key} of 'b/0' cannot be read" in err
    # A manifest's key spells its segment's name: even one whose document lost the name is
    # reported only where it belongs.
    c_key = damage(uri, "c/0", keep_name=False)
    code, out, err = ls(capsys, uri, "--prefix", "a/")
    assert code == 0 and "a/0" in out and err == ""
    code, out, err = ls(capsys, uri, "--prefix", "c/")
    assert code == 1 and f"the manifest {c_key} of 'c/0' cannot be read" in err
    assert b_key not in err
