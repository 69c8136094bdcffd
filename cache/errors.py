"""Errors of the cache.

CacheError
├── CacheFullError           the blocks an insert or append needs would pass max_bytes
├── CacheEntryNotFoundError  no entry at that address (never inserted, deleted or evicted)
├── CacheRangeError          a range that is not inside the entry
└── CacheClosedError         the cache was closed

Adapters translate their backend's errors (``lmdb.Error``) into ``CacheError`` with the
original as ``__cause__``; nothing else escapes the package.
"""


class CacheError(Exception):
    """Root of every cache error."""


class CacheFullError(CacheError):
    """Nothing was changed: the operation needed ``needed_bytes`` more of block space."""

    def __init__(self, needed_bytes: int, used_bytes: int, max_bytes: int) -> None:
        super().__init__(
            f"cache full: {needed_bytes} more bytes of blocks needed, "
            f"{used_bytes} of {max_bytes} in use"
        )
        self.needed_bytes = needed_bytes
        self.used_bytes = used_bytes
        self.max_bytes = max_bytes


class CacheEntryNotFoundError(CacheError):
    def __init__(self, address: int) -> None:
        super().__init__(f"no cache entry at address {address}")
        self.address = address


class CacheRangeError(CacheError):
    def __init__(self, address: int, offset: int, length: int, entry_length: int) -> None:
        super().__init__(
            f"range [{offset}, {offset}+{length}) is not inside cache entry {address} "
            f"of length {entry_length}"
        )
        self.address = address
        self.offset = offset
        self.length = length
        self.entry_length = entry_length


class CacheClosedError(CacheError):
    def __init__(self) -> None:
        super().__init__("the cache is closed")
