"""What ``LmdbCache`` does beyond the contract: its directory, and LMDB's errors translated."""

from __future__ import annotations

import os
from pathlib import Path

import lmdb
import pytest

from segmentstore.cache import CacheError, LmdbCache

BLOCK = 4096


def test_a_scratch_directory_is_removed_on_close() -> None:
    cache = LmdbCache(16 * BLOCK)
    assert os.path.isdir(cache.path)
    cache.insert(b"x" * 10_000)
    cache.close()
    assert not os.path.exists(cache.path)


def test_a_given_directory_is_kept_but_what_it_held_is_discarded(tmp_path: Path) -> None:
    first = LmdbCache(16 * BLOCK, path=tmp_path / "cache")
    address = first.insert(b"old bytes")
    first.close()
    assert (tmp_path / "cache").is_dir()
    second = LmdbCache(16 * BLOCK, path=tmp_path / "cache")
    assert second.stats.entries == 0
    fresh = second.insert(b"new")
    assert fresh == address  # the same address, and none of the old bytes
    assert second.read(fresh, 0, 3) == b"new"
    second.close()


def test_lmdb_errors_become_cache_errors(tmp_path: Path) -> None:
    (tmp_path / "data.mdb").write_bytes(b"not an LMDB file" * 512)
    with pytest.raises(CacheError) as raised:
        LmdbCache(16 * BLOCK, path=tmp_path)
    assert isinstance(raised.value.__cause__, lmdb.Error)


def test_a_view_is_one_private_copy() -> None:
    cache = LmdbCache(16 * BLOCK)
    address = cache.insert(b"ab" * BLOCK)
    views = cache.view(address, 1, 2 * BLOCK - 2)
    assert len(views) == 1 and views[0].readonly
    cache.delete(address)
    cache.insert(b"zz" * BLOCK)
    assert views[0].tobytes() == (b"ba" * BLOCK)[: 2 * BLOCK - 2]
    cache.close()
