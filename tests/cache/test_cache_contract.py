"""The ``Cache`` contract, run against every implementation in ``IMPLEMENTATIONS``.

Only behaviour the contract promises is checked here (cache/cache.py); what one implementation
does beyond it (runs of blocks, lazily mapped buffers, LMDB files) is tested next to it.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from typing import ClassVar, Protocol

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from segmentstore.cache import (
    BlockArenaCache,
    Buffer,
    Cache,
    CacheClosedError,
    CacheEntryNotFoundError,
    CacheFullError,
    CacheRangeError,
    CacheStats,
    LmdbCache,
)

KIB = 1024
BLOCK = 4096

Make = Callable[[int, int], Cache]  # (max_bytes, block_bytes) -> a new cache


class Factory(Protocol):
    def __call__(self, max_bytes: int, block_bytes: int = BLOCK) -> Cache: ...


def arena(max_bytes: int, block_bytes: int) -> Cache:
    # Buffers of a few blocks, so that entries cross buffer edges in every test.
    return BlockArenaCache(max_bytes, block_bytes, buffer_bytes=8 * block_bytes)


# Another implementation joins the contract suite by adding itself here.
IMPLEMENTATIONS: dict[str, Make] = {"arena": arena, "lmdb": LmdbCache}


@pytest.fixture(params=sorted(IMPLEMENTATIONS))
def implementation(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture
def make_cache(implementation: str) -> Iterator[Factory]:
    made: list[Cache] = []

    def make(max_bytes: int, block_bytes: int = BLOCK) -> Cache:
        made.append(IMPLEMENTATIONS[implementation](max_bytes, block_bytes))
        return made[-1]

    yield make
    for cache in made:
        cache.close()


def blocks(length: int, block_bytes: int = BLOCK) -> int:
    """What the contract charges an entry of ``length`` bytes."""
    return max(1, -(-length // block_bytes))


def payload(size: int, seed: int = 0) -> bytes:
    return random.Random(seed).randbytes(size)


def joined(views: list[memoryview]) -> bytes:
    return b"".join(views)


class CacheModelMachine(RuleBasedStateMachine):
    """A cache against a ``dict[address, bytearray]``; every step compares occupancy and
    counters, and reads and views compare bytes. Subclassed per implementation."""

    implementation: ClassVar[str]

    def __init__(self) -> None:
        super().__init__()
        self.model: dict[int, bytearray] = {}
        self.gone: list[int] = []
        self.hits = self.misses = self.evictions = 0

    @initialize(
        block_bytes=st.sampled_from([64, 1000, BLOCK]),
        max_bytes=st.sampled_from([64 * KIB, 256 * KIB, 1024 * KIB]),
    )
    def open_cache(self, block_bytes: int, max_bytes: int) -> None:
        self.block_bytes = block_bytes
        self.max_blocks = max_bytes // block_bytes
        self.cache = IMPLEMENTATIONS[self.implementation](max_bytes, block_bytes)

    def teardown(self) -> None:
        if hasattr(self, "cache"):
            self.cache.close()

    def used_blocks(self) -> int:
        return sum(blocks(len(data), self.block_bytes) for data in self.model.values())

    sizes = st.one_of(st.integers(0, 300), st.integers(0, 100 * KIB))
    kinds = st.sampled_from([bytes, bytearray, memoryview])

    @rule(size=sizes, seed=st.integers(0, 1000), kind=kinds)
    def insert(self, size: int, seed: int, kind: Callable[[bytes], Buffer]) -> None:
        data = payload(size, seed)
        if self.used_blocks() + blocks(size, self.block_bytes) > self.max_blocks:
            event("insert: full")
            with pytest.raises(CacheFullError):
                self.cache.insert(kind(data))
            return
        address = self.cache.insert(kind(data))
        assert address not in self.model and address not in self.gone
        self.model[address] = bytearray(data)

    @precondition(lambda self: self.model)
    @rule(choice=st.data(), size=sizes, seed=st.integers(0, 1000), kind=kinds)
    def append(
        self, choice: st.DataObject, size: int, seed: int, kind: Callable[[bytes], Buffer]
    ) -> None:
        address = choice.draw(st.sampled_from(sorted(self.model)))
        data = payload(size, seed)
        old = len(self.model[address])
        extra = blocks(old + size, self.block_bytes) - blocks(old, self.block_bytes)
        event(f"append: {'no' if extra == 0 else 'new'} block")
        if self.used_blocks() + extra > self.max_blocks:
            event("append: full")
            with pytest.raises(CacheFullError):
                self.cache.append(address, kind(data))
            return
        assert self.cache.append(address, kind(data)) == old + size
        self.model[address] += data

    def draw_range(self, choice: st.DataObject) -> tuple[int, int, int]:
        address = choice.draw(st.sampled_from(sorted(self.model)))
        length = len(self.model[address])
        offset = choice.draw(st.integers(0, length))
        return address, offset, choice.draw(st.integers(0, length - offset))

    @precondition(lambda self: self.model)
    @rule(choice=st.data())
    def read(self, choice: st.DataObject) -> None:
        address, offset, length = self.draw_range(choice)
        got = self.cache.read(address, offset, length)
        self.hits += 1
        assert type(got) is bytes
        assert got == self.model[address][offset : offset + length]

    @precondition(lambda self: self.model)
    @rule(choice=st.data())
    def view(self, choice: st.DataObject) -> None:
        address, offset, length = self.draw_range(choice)
        views = self.cache.view(address, offset, length)
        self.hits += 1
        assert all(isinstance(v, memoryview) and v.readonly and len(v) for v in views)
        assert joined(views) == self.model[address][offset : offset + length]

    @precondition(lambda self: self.model)
    @rule(choice=st.data(), evict=st.booleans())
    def remove(self, choice: st.DataObject, evict: bool) -> None:
        address = choice.draw(st.sampled_from(sorted(self.model)))
        (self.cache.evict if evict else self.cache.delete)(address)
        self.evictions += evict
        del self.model[address]
        self.gone.append(address)

    @precondition(lambda self: self.gone)
    @rule(choice=st.data(), use_view=st.booleans())
    def read_removed(self, choice: st.DataObject, use_view: bool) -> None:
        address = choice.draw(st.sampled_from(self.gone))
        with pytest.raises(CacheEntryNotFoundError) as raised:
            (self.cache.view if use_view else self.cache.read)(address, 0, 0)
        assert raised.value.address == address
        self.misses += 1

    @invariant()
    def stats_match_the_model(self) -> None:
        if not hasattr(self, "cache"):
            return
        assert self.cache.stats == CacheStats(
            used_bytes=self.used_blocks() * self.block_bytes,
            stored_bytes=sum(len(data) for data in self.model.values()),
            max_bytes=self.cache.max_bytes,
            entries=len(self.model),
            hits=self.hits,
            misses=self.misses,
            evictions=self.evictions,
        )
        assert self.cache.stats.used_bytes <= self.cache.max_bytes
        for address, data in self.model.items():
            assert self.cache.length(address) == len(data)


class TestCacheContract:
    def test_matches_a_dict_model(self, implementation: str) -> None:
        class Machine(CacheModelMachine):
            pass

        Machine.implementation = implementation
        run_state_machine_as_test(
            Machine,
            settings=settings(
                max_examples=100,
                stateful_step_count=40,
                deadline=None,
                suppress_health_check=[HealthCheck.too_slow],
            ),
        )

    def test_round_trip_of_random_sizes(self, make_cache: Factory) -> None:
        rng = random.Random(3)
        cache = make_cache(16 * 1024 * KIB)
        stored: dict[int, bytearray] = {}
        for _ in range(60):
            data = rng.randbytes(rng.randint(0, 100 * KIB))
            stored[cache.insert(data)] = bytearray(data)
        for _ in range(200):
            address = rng.choice(list(stored))
            data = rng.randbytes(rng.choice([1, 100, KIB, 5000]))
            assert cache.append(address, data) == len(stored[address]) + len(data)
            stored[address] += data
        for address, expected in stored.items():
            assert cache.length(address) == len(expected)
            assert cache.read(address, 0, len(expected)) == expected
            assert joined(cache.view(address, 0, len(expected))) == expected
            for _ in range(5):
                offset = rng.randint(0, len(expected))
                length = rng.randint(0, len(expected) - offset)
                wanted = expected[offset : offset + length]
                assert cache.read(address, offset, length) == wanted
                assert joined(cache.view(address, offset, length)) == wanted

    def test_an_empty_entry_owns_one_block_that_appends_fill(self, make_cache: Factory) -> None:
        cache = make_cache(4 * BLOCK)
        address = cache.insert(b"")
        assert (cache.length(address), cache.read(address, 0, 0)) == (0, b"")
        assert cache.view(address, 0, 0) == []
        assert cache.stats.used_bytes == BLOCK
        assert cache.append(address, b"") == 0
        assert cache.append(address, b"x" * BLOCK) == BLOCK
        assert cache.stats.used_bytes == BLOCK

    def test_appends_fill_the_last_block_first(self, make_cache: Factory) -> None:
        cache = make_cache(64 * BLOCK)
        one, two = cache.insert(b"a" * 100), cache.insert(b"b")
        expected = {one: bytearray(b"a" * 100), two: bytearray(b"b")}
        # Interleaved small appends to two entries: each fills its own last block.
        for i in range(300):
            address = one if i % 3 else two
            chunk = bytes([i % 251]) * (KIB if i % 2 else 300)
            cache.append(address, chunk)
            expected[address] += chunk
            used = sum(blocks(len(data)) for data in expected.values())
            assert cache.stats.used_bytes == used * BLOCK
        for address, data in expected.items():
            assert cache.read(address, 0, len(data)) == data

    def test_the_bound_holds_and_a_full_cache_changes_nothing(self, make_cache: Factory) -> None:
        cache = make_cache(10 * BLOCK + 100)  # rounds down to 10 blocks
        first = cache.insert(payload(7 * BLOCK + 10, 1))  # 8 blocks, 4086 bytes spare
        second = cache.insert(payload(BLOCK, 2))  # 1 block, none spare
        before = cache.stats
        with pytest.raises(CacheFullError) as raised:
            cache.insert(payload(2 * BLOCK + 1))
        assert (raised.value.needed_bytes, raised.value.used_bytes) == (3 * BLOCK, 9 * BLOCK)
        assert raised.value.max_bytes == 10 * BLOCK + 100
        with pytest.raises(CacheFullError):
            cache.append(first, payload(BLOCK - 10 + 2 * BLOCK + 1))
        with pytest.raises(CacheFullError):
            cache.append(second, payload(2 * BLOCK))
        assert cache.stats == before
        assert cache.read(first, 0, 7 * BLOCK + 10) == payload(7 * BLOCK + 10, 1)
        assert cache.read(second, 0, BLOCK) == payload(BLOCK, 2)
        # The spare bytes of a last block are still usable, and so is the last free block.
        assert cache.append(first, b"f" * (BLOCK - 10)) == 8 * BLOCK
        third = cache.insert(b"t" * BLOCK)
        assert cache.stats.used_bytes == 10 * BLOCK == cache.stats.max_bytes - 100
        with pytest.raises(CacheFullError):
            cache.insert(b"")
        with pytest.raises(CacheFullError):
            cache.append(third, b"t")
        assert cache.length(third) == BLOCK

    def test_deleted_blocks_are_reused(self, make_cache: Factory) -> None:
        rng = random.Random(5)
        cache = make_cache(32 * BLOCK)
        live: dict[int, bytes] = {}
        for round_ in range(300):
            data = payload(rng.randint(0, 6 * BLOCK), round_)
            while cache.stats.used_bytes + blocks(len(data)) * BLOCK > 32 * BLOCK:
                victim = rng.choice(list(live))
                cache.delete(victim)
                del live[victim]
            live[cache.insert(data)] = data
        for address, data in live.items():
            assert cache.read(address, 0, len(data)) == data
        for address in list(live):
            cache.delete(address)
        assert cache.stats.used_bytes == cache.stats.stored_bytes == cache.stats.entries == 0
        everything = cache.insert(payload(32 * BLOCK))
        assert cache.read(everything, 0, 32 * BLOCK) == payload(32 * BLOCK)

    def test_stats_count_hits_misses_and_evictions(self, make_cache: Factory) -> None:
        cache = make_cache(16 * BLOCK)
        kept, evicted, deleted = (cache.insert(b"k" * 10) for _ in range(3))
        cache.read(kept, 0, 10)
        cache.view(kept, 2, 3)
        cache.length(kept)
        cache.evict(evicted)
        cache.delete(deleted)
        for address in (evicted, deleted, 12345):
            with pytest.raises(CacheEntryNotFoundError):
                cache.read(address, 0, 1)
            with pytest.raises(CacheEntryNotFoundError):
                cache.view(address, 0, 1)
        for call in (cache.length, cache.delete, cache.evict):
            with pytest.raises(CacheEntryNotFoundError):
                call(deleted)
        with pytest.raises(CacheEntryNotFoundError):
            cache.append(deleted, b"x")
        # Only read and view count; a failed evict is not an eviction.
        assert cache.stats == CacheStats(
            used_bytes=BLOCK,
            stored_bytes=10,
            max_bytes=16 * BLOCK,
            entries=1,
            hits=2,
            misses=6,
            evictions=1,
        )

    def test_addresses_are_never_reused(self, make_cache: Factory) -> None:
        cache = make_cache(BLOCK)
        seen = set()
        for _ in range(50):
            address = cache.insert(b"x")
            assert address not in seen
            seen.add(address)
            cache.delete(address)

    def test_a_range_outside_the_entry_is_refused(self, make_cache: Factory) -> None:
        cache = make_cache(4 * BLOCK)
        address = cache.insert(b"0123456789")
        for offset, length in [(0, 11), (10, 1), (11, 0), (-1, 2), (3, -1)]:
            for call in (cache.read, cache.view):
                with pytest.raises(CacheRangeError) as raised:
                    call(address, offset, length)
                assert raised.value.entry_length == 10
        assert cache.read(address, 10, 0) == b""
        assert (cache.stats.hits, cache.stats.misses) == (1, 0)

    def test_views_are_read_only(self, make_cache: Factory) -> None:
        cache = make_cache(16 * BLOCK)
        address = cache.insert(payload(3 * BLOCK))
        for view in cache.view(address, 1, 3 * BLOCK - 2):
            assert view.readonly
            with pytest.raises(TypeError):
                view[0] = 1
        assert cache.read(address, 0, 3 * BLOCK) == payload(3 * BLOCK)

    def test_accepts_any_contiguous_buffer(self, make_cache: Factory) -> None:
        cache = make_cache(16 * BLOCK)
        words = memoryview(bytearray(range(16))).cast("I")  # not a byte format
        address = cache.insert(words)
        cache.append(address, bytearray(b"ba"))
        cache.append(address, memoryview(b"xmvx")[1:3])
        assert cache.read(address, 0, 20) == bytes(range(16)) + b"bamv"

    def test_closed_cache_refuses_everything_but_stats(self, make_cache: Factory) -> None:
        cache = make_cache(4 * BLOCK)
        address = cache.insert(b"x")
        cache.close()
        cache.close()
        for call in (
            lambda: cache.insert(b"y"),
            lambda: cache.append(address, b"y"),
            lambda: cache.read(address, 0, 1),
            lambda: cache.view(address, 0, 1),
            lambda: cache.length(address),
            lambda: cache.delete(address),
            lambda: cache.evict(address),
        ):
            with pytest.raises(CacheClosedError):
                call()
        assert cache.stats.misses == 0
