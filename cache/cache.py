"""The cache contract that every implementation honours.

The cache keeps payload bytes for the read index (appends not yet in Tier 2, and blocks read
back from Tier 2) outside the Python heap. It is a store of *entries*: each entry is one byte
sequence that can grow at its end, kept in a chain of fixed-size *blocks* of ``block_bytes``.

* **Addresses.** :meth:`Cache.insert` returns an int that names the entry. Addresses are never
  reused while the cache is open, so a stale address misses (``CacheEntryNotFoundError``)
  instead of reading another entry's bytes.
* **Blocks and the bound.** An entry of ``n`` bytes owns ``max(1, ceil(n / block_bytes))``
  blocks: an empty entry owns one block too, so the number of entries, and with it every byte
  of bookkeeping, is bounded by the number of blocks. :meth:`Cache.append` fills the entry's
  last block before it takes another one, so many small appends to one entry share blocks.
  ``used_bytes`` (blocks in use * ``block_bytes``) never exceeds ``max_bytes``.
* **All or nothing.** An insert or append that would need more blocks than ``max_bytes``
  allows raises ``CacheFullError`` and changes nothing: no entry, no byte, no counter. The
  cache never evicts on its own; what to evict (least recently used, and only data already in
  Tier 2) is the caller's decision, carried out with :meth:`Cache.evict`.
* **Reads.** :meth:`Cache.read` returns a copy. :meth:`Cache.view` lends read-only views of
  the cache's own memory where the implementation can (see its docstring).
* **Errors.** An address that names no entry (never inserted, deleted, evicted) raises
  ``CacheEntryNotFoundError``; a range outside the entry ``CacheRangeError``; any call but
  :meth:`Cache.close` and :attr:`Cache.stats` after close ``CacheClosedError``. A backend's own
  errors are translated to ``CacheError`` by its adapter.
* **Concurrency.** Not thread-safe: call it from one thread (the event loop). Every method is
  synchronous and short; none awaits, so each is atomic with respect to other tasks.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

Buffer = bytes | bytearray | memoryview

DEFAULT_BLOCK_BYTES = 4096


@dataclass(frozen=True, slots=True)
class CacheStats:
    """A snapshot of a cache's occupancy and counters since it was opened."""

    used_bytes: int  # blocks in use * block_bytes; never above max_bytes
    stored_bytes: int  # payload bytes in all entries
    max_bytes: int
    entries: int
    hits: int  # read/view calls on an existing entry
    misses: int  # read/view calls on an address that names no entry
    evictions: int  # entries removed through evict()


class Cache(ABC):
    """A bounded store of growable byte entries in fixed-size blocks (module docstring)."""

    @property
    @abstractmethod
    def block_bytes(self) -> int:
        """The size of one block."""

    @property
    @abstractmethod
    def max_bytes(self) -> int:
        """The bound on ``used_bytes``."""

    @abstractmethod
    def insert(self, data: Buffer) -> int:
        """Store ``data`` (may be empty) as a new entry and return its address.

        Raises ``CacheFullError``, changing nothing, if its blocks do not fit under max_bytes.
        """

    @abstractmethod
    def append(self, address: int, data: Buffer) -> int:
        """Add ``data`` at the end of the entry and return the entry's new length.

        The entry's last block is filled first. All or nothing: ``CacheFullError`` if the
        blocks it needs do not fit, and then the entry is unchanged.
        """

    @abstractmethod
    def read(self, address: int, offset: int, length: int) -> bytes:
        """A copy of the entry's bytes ``[offset, offset + length)``.

        Copied once, straight from the cache's memory into the result. Counts a hit, or a
        miss when the entry does not exist.
        """

    @abstractmethod
    def view(self, address: int, offset: int, length: int) -> list[memoryview]:
        """Read-only views whose concatenation is the entry's bytes ``[offset, offset + length)``.

        A view points into the cache's memory: it is valid only until the entry is deleted or
        evicted (its blocks are then reused, and the view shows other bytes) and must be
        consumed before the caller's next ``await``, when another task may delete the entry.
        Views are for callers that write them out synchronously (``socket.send``,
        ``writelines``, ``bytes.join``). Counts a hit, or a miss when the entry does not exist.
        """

    @abstractmethod
    def length(self, address: int) -> int:
        """The entry's length in bytes."""

    @abstractmethod
    def delete(self, address: int) -> None:
        """Remove the entry and free its blocks for reuse."""

    @abstractmethod
    def evict(self, address: int) -> None:
        """:meth:`delete`, counted in ``stats.evictions``: the caller chose to evict it."""

    @property
    @abstractmethod
    def used_bytes(self) -> int:
        """Blocks in use * ``block_bytes``: what :attr:`stats` says, without building it (the
        store asks on every append)."""

    @property
    @abstractmethod
    def stats(self) -> CacheStats:
        """Occupancy and counters now (also after close)."""

    @abstractmethod
    def close(self) -> None:
        """Release the memory (or files) behind the cache. Idempotent."""
