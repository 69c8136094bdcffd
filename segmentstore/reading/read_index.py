"""The read index of one segment: where its readable bytes are, and who waits at its tail.

An AVL tree keyed by start offset holds entries that point at cache entries (docs/architecture.md,
the path of a read). Appends in offset order grow the last entry until it holds
``max_entry_bytes`` (the cache fills its last block first), so millions of small appends cost
a few entries, not millions. Each entry remembers the cache generation of its last use; the
cache manager evicts the oldest entries that already lie below ``storage_length`` (in Tier 2),
never bytes that exist only in Tier 1.

Tail readers park on a future that the segment's next change (append, seal, merge, delete)
completes.

What a caller may rely on, and must uphold: entries never overlap, so a byte has at most one
home. :meth:`SegmentReadIndex.append` takes bytes only at or past the end of the last entry (a
gap before them is allowed: what lies there is in Tier 2 or truncated), and
:meth:`SegmentReadIndex.insert_fetched` only inside a gap; either refuses anything else with
``ValueError`` and changes nothing, since such a call is a bug in the caller that would
otherwise serve wrong bytes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from segmentstore.cache import Cache
from segmentstore.logs.operations import Buffer
from segmentstore.reading.avl_tree import AvlTree


class IndexEntry:
    __slots__ = ("address", "generation", "length")

    def __init__(self, address: int, length: int, generation: int) -> None:
        self.address = address  # cache entry holding this entry's bytes
        self.length = length
        self.generation = generation  # cache generation of the last read or write


class SegmentReadIndex:
    __slots__ = (
        "_cache",
        "_clock",
        "_deferred",
        "_max_entry",
        "_pins",
        "_tail_waiters",
        "_tree",
        "dropped",
        "storage_length",
    )

    def __init__(self, cache: Cache, clock: GenerationClock, max_entry_bytes: int) -> None:
        self._cache = cache
        self._clock = clock
        self._max_entry = max_entry_bytes
        self._tree: AvlTree[IndexEntry] = AvlTree()
        # One future per waiting tail reader (a dict as an ordered set): a reader awaits its
        # own and is woken in the loop's next turn, in the order the readers came.
        self._tail_waiters: dict[asyncio.Future[None], None] = {}
        # Bytes below this are in Tier 2, so their entries may be evicted.
        self.storage_length = 0
        # While views handed out by pin_views are in use (a Tier 2 write in a worker thread),
        # no cache entry of this index is freed: frees wait in _deferred until the last unpin.
        self._pins = 0
        self._deferred: list[int] = []
        # The segment left this index (deleted, evicted, its container stopped): bytes fetched
        # for it meanwhile are not cached, as nothing would ever free them.
        self.dropped = False

    # -- writes ---------------------------------------------------------------------------

    def append(self, offset: int, data: Buffer) -> None:
        """Index ``data`` at ``offset``, at or past the end of the last entry (else
        ``ValueError``), and wake the tail readers; raises ``CacheFullError`` (changing nothing)
        if the cache has no room, which the caller's reservation is meant to rule out."""
        last = self._tree.last()
        if last is not None:
            start, entry = last
            end = start + entry.length
            if offset < end:
                raise ValueError(f"an append at {offset} overlaps the bytes indexed up to {end}")
            if end == offset and entry.length + len(data) <= self._max_entry:
                self._cache.append(entry.address, data)
                entry.length += len(data)
                entry.generation = self._clock.now
                self.notify()
                return
        address = self._cache.insert(data)
        self._tree.insert(offset, IndexEntry(address, len(data), self._clock.now))
        self.notify()

    def insert_fetched(self, offset: int, data: bytes) -> None:
        """Cache bytes fetched from Tier 2 at ``offset``: ``[offset, offset + len(data))`` must
        lie in a gap (else ``ValueError``); ``CacheFullError`` if the cache has no room. Tail
        readers are not woken: these bytes were readable already. Nothing happens once the
        index is dropped (a fetch that outlived its segment)."""
        if self.dropped:
            return
        below = self._tree.floor(offset)
        if below is not None and below[0] + below[1].length > offset:
            raise ValueError(f"bytes fetched at {offset} overlap the entry at {below[0]}")
        above = self._tree.ceiling(offset + 1)
        if above is not None and above[0] < offset + len(data):
            raise ValueError(
                f"bytes fetched at {offset}+{len(data)} overlap the entry at {above[0]}"
            )
        address = self._cache.insert(data)
        self._tree.insert(offset, IndexEntry(address, len(data), self._clock.now))

    def gap_around(self, offset: int) -> tuple[int, int]:
        """The uncached range around ``offset``: from the end of the entry before it to the
        start of the entry after it (``offset`` itself must not be cached)."""
        start, end = 0, 1 << 63
        below = self._tree.floor(offset)
        if below is not None:
            start = below[0] + below[1].length
        above = self._tree.ceiling(offset + 1)
        if above is not None:
            end = above[0]
        return start, end

    def truncate(self, start_offset: int) -> None:
        """Free the entries that lie wholly below ``start_offset``."""
        found = self._tree.floor(start_offset)
        if found is None:
            return
        start, entry = found
        below = start_offset if start + entry.length <= start_offset else start
        for removed in self._tree.remove_below(below):
            self._free(removed.address)

    def absorb(self, source: SegmentReadIndex, at_offset: int) -> None:
        """Take over ``source``'s entries (no bytes copied): its offset 0 is ``at_offset``."""
        # Source offset o is target offset at_offset + o (a merged source starts at 0), even
        # when its first entries were evicted after reaching Tier 2.
        for start, entry in list(source._tree.items()):
            self._tree.insert(at_offset + start, entry)
        source._tree.clear()
        source.dropped = True  # the source is gone: a fetch for it caches nothing now
        source.notify()
        self.notify()

    def drop(self) -> None:
        """Free every entry (the segment is deleted) and wake its tail readers."""
        self.dropped = True
        for _, entry in self._tree.items():
            self._free(entry.address)
        self._tree.clear()
        self.notify()

    def _free(self, address: int) -> None:
        if self._pins:
            self._deferred.append(address)
        else:
            self._cache.delete(address)

    # -- pinned views (the Storage Writer's zero-copy path) -------------------------------

    def pin_views(self, offset: int, length: int) -> list[memoryview]:
        """Views of exactly the bytes ``[offset, offset + length)``, which must be indexed,
        valid until :meth:`unpin`: meanwhile no entry of this index is freed or evicted, so the
        views may cross an ``await`` (the cache contract's condition for using them)."""
        views: list[memoryview] = []
        position, end = offset, offset + length
        for start, entry in self._tree.items(offset):
            if start > position or position >= end:
                break
            within = position - start
            if within >= entry.length:
                continue
            take = min(entry.length - within, end - position)
            views += self._cache.view(entry.address, within, take)
            position += take
        if position != end:
            raise AssertionError(f"bytes {offset}+{length} are not all indexed")
        self._pins += 1
        return views

    def unpin(self) -> None:
        self._pins -= 1
        if not self._pins and self._deferred:
            for address in self._deferred:
                self._cache.delete(address)
            self._deferred.clear()

    # -- reads ----------------------------------------------------------------------------

    def read(self, offset: int, max_length: int) -> bytes:
        """Up to ``max_length`` contiguous indexed bytes from ``offset`` (empty if none)."""
        found = self._tree.floor(offset)
        if found is not None:
            start, entry = found
            within = offset - start
            if within + max_length <= entry.length:  # the common case: one entry serves it
                entry.generation = self._clock.now
                return self._cache.read(entry.address, within, max_length)
        pieces: list[bytes] = []
        position = offset
        remaining = max_length
        now = self._clock.now
        for start, entry in self._tree.items(offset):
            if start > position:
                break  # a gap: not cached
            within = position - start
            if within >= entry.length:
                continue
            take = min(entry.length - within, remaining)
            pieces.append(self._cache.read(entry.address, within, take))
            entry.generation = now
            position += take
            remaining -= take
            if not remaining:
                break
        if len(pieces) == 1:
            return pieces[0]
        return b"".join(pieces)

    # -- eviction -------------------------------------------------------------------------

    def evict(self, oldest_kept_generation: int) -> int:
        """Evict entries in Tier 2 last used before ``oldest_kept_generation``; bytes freed."""
        if self._pins:
            return 0  # its views are being written out
        freed = 0
        limit = self.storage_length
        victims = []
        for start, entry in self._tree.items():
            if start + entry.length > limit:
                break
            if entry.generation < oldest_kept_generation:
                victims.append(start)
        for start in victims:
            victim = self._tree.remove(start)
            assert victim is not None
            self._cache.evict(victim.address)
            freed += victim.length
        return freed

    @property
    def entries(self) -> int:
        return len(self._tree)

    @property
    def in_use(self) -> bool:
        """Whether a tail reader waits on it or the Storage Writer holds views of it."""
        return bool(self._tail_waiters) or self._pins > 0

    # -- tail readers ---------------------------------------------------------------------

    async def wait_for_change(self, timeout_s: float) -> None:
        """Until the segment's next change, or ``timeout_s`` if that comes first."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._tail_waiters[waiter] = None
        timer = waiter.get_loop().call_later(timeout_s, _wake, waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            self._tail_waiters.pop(waiter, None)

    def notify(self) -> None:
        waiters = self._tail_waiters
        if waiters:
            self._tail_waiters = {}
            for waiter in waiters:
                _wake(waiter)


def _wake(waiter: asyncio.Future[None]) -> None:
    """A change came, or the reader's time ran out: either way it looks again."""
    if not waiter.done():
        waiter.set_result(None)


class GenerationClock:
    """The cache's notion of time for least-recently-used eviction: a counter the cache
    manager advances; entries remember the value of their last use."""

    __slots__ = ("now",)

    def __init__(self) -> None:
        self.now = 0


# Builds the read index of one segment (a container calls it for every segment it creates or
# recovers): Pravega's ReadIndexFactory, per segment.
ReadIndexFactory = Callable[[], SegmentReadIndex]
