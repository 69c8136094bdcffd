"""The package's public names, and that importing it does not need its optional backend."""

from __future__ import annotations

import subprocess
import sys

from segmentstore import cache


def test_public_names_are_pinned() -> None:
    assert sorted(cache.__all__) == [
        "BlockArenaCache",
        "Buffer",
        "Cache",
        "CacheClosedError",
        "CacheEntryNotFoundError",
        "CacheError",
        "CacheFullError",
        "CacheRangeError",
        "CacheStats",
        "LmdbCache",
    ]
    for name in cache.__all__:
        assert getattr(cache, name) is not None


def test_every_error_is_a_cache_error() -> None:
    for name in cache.__all__:
        value = getattr(cache, name)
        if isinstance(value, type) and issubclass(value, Exception):
            assert issubclass(value, cache.CacheError), name


def test_importing_the_package_does_not_load_lmdb() -> None:
    code = (
        "import sys; from segmentstore import cache; cache.BlockArenaCache(4096).close(); "
        "print('lmdb' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "False", result.stderr
