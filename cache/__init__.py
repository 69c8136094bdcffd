"""The cache: payload bytes of the read index, kept off the Python heap in fixed-size blocks.

A leaf package: May import: nothing of the project. The core talks to it through
:class:`Cache` and translates :class:`CacheError` leaves at its boundary. The store uses
:class:`BlockArenaCache`; :class:`LmdbCache` meets the same contract over LMDB (the ``cache``
extra) and is imported only when asked for. Layout and the measurements behind the choice:
``docs/formats.md``, section Cache.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from segmentstore.cache.arena_cache import BlockArenaCache
from segmentstore.cache.cache import Buffer, Cache, CacheStats
from segmentstore.cache.errors import (
    CacheClosedError,
    CacheEntryNotFoundError,
    CacheError,
    CacheFullError,
    CacheRangeError,
)

if TYPE_CHECKING:
    from segmentstore.cache.lmdb_cache import LmdbCache

__all__ = [
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


def __getattr__(name: str) -> Any:
    # lmdb is an optional dependency: load it only for code that names LmdbCache.
    if name == "LmdbCache":
        from segmentstore.cache.lmdb_cache import LmdbCache

        return LmdbCache
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
