"""The ``ChunkStorage`` contract, run against every backend in ``HARNESSES``.

Only behaviour the contract promises is checked here (tier2/chunk_storage.py); what one backend
does beyond it (lock and temporary files, multipart uploads, error translation of a dead
server) is tested next to it.
"""

from __future__ import annotations

import array
import threading
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

import pytest

from segmentstore.tier2 import (
    BadChunkOffsetError,
    Buffer,
    ChunkExistsError,
    ChunkNotFoundError,
    ChunkRangeError,
    ChunkStorage,
    ManifestConflictError,
    Tier2ClosedError,
    Tier2Error,
)

if TYPE_CHECKING:
    from conftest import StorageHarness

MIB = 1024 * 1024


def pattern(size: int, seed: int = 0) -> bytes:
    """``size`` bytes in which every 4-byte word differs from its neighbours."""
    words = (size + 3) // 4
    return array.array("I", range(seed, seed + words)).tobytes()[:size]


def at_once(calls: list[Callable[[], object]]) -> list[object]:
    """Run every call in its own thread, released together; what each returned or raised."""
    outcomes: list[object] = [None] * len(calls)
    barrier = threading.Barrier(len(calls))

    def run(i: int) -> None:
        barrier.wait()
        try:
            outcomes[i] = calls[i]()
        except Exception as e:
            outcomes[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


class TestChunkStorageContract:
    def test_create_then_read_size_exists(self, storage: ChunkStorage) -> None:
        data = pattern(10_000)
        storage.create("segments/a/chunk-1", [data])
        assert storage.exists("segments/a/chunk-1")
        assert storage.size("segments/a/chunk-1") == 10_000
        assert storage.read("segments/a/chunk-1", 0, 10_000) == data
        assert storage.read("segments/a/chunk-1", 1234, 5000) == data[1234:6234]
        assert storage.read("segments/a/chunk-1", 9999, 1) == data[9999:]
        assert storage.read("segments/a/chunk-1", 10_000, 0) == b""

    def test_parts_of_every_buffer_kind_are_concatenated(self, storage: ChunkStorage) -> None:
        words = array.array("I", [1, 2, 3])  # a memoryview whose items are not bytes
        parts: list[Buffer] = [
            b"head",
            bytearray(b"-middle-"),
            memoryview(b"xxtailxx")[2:6],
            memoryview(words),
        ]
        storage.create("k", parts)
        expected = b"head-middle-tail" + words.tobytes()
        assert storage.size("k") == len(expected)
        assert storage.read("k", 0, len(expected)) == expected

    def test_an_empty_object(self, storage: ChunkStorage) -> None:
        storage.create("empty", [])
        assert storage.exists("empty")
        assert storage.size("empty") == 0
        assert storage.read("empty", 0, 0) == b""
        assert storage.list("") == ["empty"]

    def test_create_never_replaces(self, storage: ChunkStorage) -> None:
        storage.create("k", [b"first"])
        with pytest.raises(ChunkExistsError) as caught:
            storage.create("k", [b"second, longer"])
        assert caught.value.key == "k"
        assert storage.read("k", 0, 5) == b"first"
        assert storage.size("k") == 5

    def test_missing_objects(self, storage: ChunkStorage) -> None:
        assert not storage.exists("nothing")
        for call in (lambda: storage.size("nothing"), lambda: storage.read("nothing", 0, 1)):
            with pytest.raises(ChunkNotFoundError) as caught:
                call()
            assert caught.value.key == "nothing"
        assert storage.get("nothing") is None

    def test_a_prefix_of_keys_is_not_an_object(self, storage: ChunkStorage) -> None:
        storage.create("segments/abc/chunk", [b"x"])
        for key in ("segments", "segments/abc"):
            assert not storage.exists(key)
            with pytest.raises(ChunkNotFoundError):
                storage.size(key)

    def test_reads_must_lie_inside_the_object(self, storage: ChunkStorage) -> None:
        storage.create("k", [b"0123456789"])
        for offset, length in ((0, 11), (5, 6), (10, 1), (11, 0), (100, 5)):
            with pytest.raises(ChunkRangeError) as caught:
                storage.read("k", offset, length)
            assert (caught.value.key, caught.value.offset, caught.value.length) == (
                "k",
                offset,
                length,
            )
            assert caught.value.size == 10

    def test_append_at_the_size(self, storage: ChunkStorage) -> None:
        storage.create("k", [b"abc"])
        if not storage.supports_append:
            with pytest.raises(Tier2Error):
                storage.append("k", 3, [b"def"])
            assert storage.read("k", 0, 3) == b"abc"
            return
        storage.append("k", 3, [b"de", memoryview(b"f")])
        storage.append("k", 6, [])
        storage.append("k", 6, [pattern(100_000)])
        assert storage.size("k") == 100_006
        assert storage.read("k", 0, 100_006) == b"abcdef" + pattern(100_000)

    def test_append_at_another_offset_writes_nothing(self, storage: ChunkStorage) -> None:
        if not storage.supports_append:
            pytest.skip(f"{storage.uri} has no append")
        storage.create("k", [b"abc"])
        for offset in (0, 2, 4, 1000):
            with pytest.raises(BadChunkOffsetError) as caught:
                storage.append("k", offset, [b"zzz"])
            assert (caught.value.expected_offset, caught.value.given_offset) == (3, offset)
        assert storage.read("k", 0, 3) == b"abc"
        assert storage.size("k") == 3
        with pytest.raises(ChunkNotFoundError):
            storage.append("missing", 0, [b"x"])

    def test_list_is_a_sorted_string_prefix_match(self, storage: ChunkStorage) -> None:
        keys = ["segments/abc/m", "segments/abc/chunk-2", "segments/abd/x", "segments/b/y", "z"]
        for key in keys:
            storage.create(key, [b"."])
        assert storage.list("") == sorted(keys)
        assert storage.list("segments/") == sorted(keys[:4])
        assert storage.list("segments/ab") == sorted(keys[:3])
        assert storage.list("segments/abc/") == ["segments/abc/chunk-2", "segments/abc/m"]
        assert storage.list("segments/abc/c") == ["segments/abc/chunk-2"]
        assert storage.list("segments/abc/m") == ["segments/abc/m"]
        assert storage.list("segments/q") == []
        assert storage.list("nowhere/at/all/") == []

    def test_list_shows_only_objects(self, storage: ChunkStorage) -> None:
        storage.create("d/chunk", [b"x"])
        version = storage.put_if("d/manifest.json", b"{}", None)
        storage.put_if("d/manifest.json", b"{ }", version)
        storage.create("d/other", [b"y"])
        storage.delete("d/other")
        assert storage.list("") == ["d/chunk", "d/manifest.json"]

    def test_delete_is_durable_and_idempotent(
        self, open_storage: Callable[[], ChunkStorage]
    ) -> None:
        storage = open_storage()
        storage.create("a/b/c", [b"x"])
        storage.create("a/b/d", [b"y"])
        storage.delete("a/b/c")
        storage.delete("a/b/c")
        storage.delete("never/there")
        assert not storage.exists("a/b/c")
        assert storage.list("") == ["a/b/d"]
        storage.delete("a/b/d")
        assert storage.list("") == []
        storage.create("a/b/c", [b"again"])  # a deleted key can be created again
        assert open_storage().read("a/b/c", 0, 5) == b"again"

    def test_objects_are_visible_to_another_client(
        self, open_storage: Callable[[], ChunkStorage]
    ) -> None:
        writer, reader = open_storage(), open_storage()
        writer.create("k", [b"shared"])
        version = writer.put_if("m", b"v1", None)
        assert reader.read("k", 0, 6) == b"shared"
        assert reader.get("m") == (b"v1", version)

    def test_put_if_creates_and_replaces(self, storage: ChunkStorage) -> None:
        first = storage.put_if("seg/manifest.json", b'{"v": 1}', None)
        assert storage.get("seg/manifest.json") == (b'{"v": 1}', first)
        second = storage.put_if("seg/manifest.json", b'{"v": 2}', first)
        assert second != first
        assert storage.get("seg/manifest.json") == (b'{"v": 2}', second)
        assert storage.exists("seg/manifest.json")
        assert storage.size("seg/manifest.json") == 8

    def test_put_if_refuses_a_stale_or_wrong_expectation(self, storage: ChunkStorage) -> None:
        first = storage.put_if("m", b"one", None)
        second = storage.put_if("m", b"two", first)
        for expected in (None, first):
            with pytest.raises(ManifestConflictError) as caught:
                storage.put_if("m", b"three", expected)
            assert caught.value.key == "m"
        assert storage.get("m") == (b"two", second)
        with pytest.raises(ManifestConflictError):
            storage.put_if("absent", b"x", second)  # a version was expected, there is none
        assert storage.get("absent") is None

    def test_put_if_after_delete_starts_over(self, storage: ChunkStorage) -> None:
        version = storage.put_if("m", b"one", None)
        storage.delete("m")
        assert storage.get("m") is None
        with pytest.raises(ManifestConflictError):
            storage.put_if("m", b"two", version)
        storage.put_if("m", b"two", None)
        assert storage.get("m") is not None

    def test_two_writers_race_one_wins(self, open_storage: Callable[[], ChunkStorage]) -> None:
        a, b = open_storage(), open_storage()
        base = a.put_if("m", b"base", None)
        read_by_a = a.get("m")
        read_by_b = b.get("m")
        assert read_by_a is not None and read_by_b is not None
        assert read_by_a[1] == read_by_b[1] == base
        winner = a.put_if("m", b"from a", read_by_a[1])
        with pytest.raises(ManifestConflictError):
            b.put_if("m", b"from b", read_by_b[1])
        assert b.get("m") == (b"from a", winner)

    def test_two_creators_race_one_wins(self, open_storage: Callable[[], ChunkStorage]) -> None:
        a, b = open_storage(), open_storage()
        assert a.get("m") is None and b.get("m") is None
        a.put_if("m", b"a", None)
        with pytest.raises(ManifestConflictError):
            b.put_if("m", b"b", None)
        found = b.get("m")
        assert found is not None and found[0] == b"a"

    def test_concurrent_put_if_has_one_winner_per_round(
        self, harness: StorageHarness, open_storage: Callable[[], ChunkStorage]
    ) -> None:
        if not harness.atomic_conditional_writes:
            pytest.skip(f"{harness.name} as tested does not decide concurrent races itself")
        clients = [open_storage() for _ in range(6)]
        version = clients[0].put_if("m", b"round 0", None)
        for round_number in range(1, 6):
            data = [f"round {round_number} by {i}".encode() for i in range(len(clients))]
            outcomes = at_once(
                [partial(c.put_if, "m", d, version) for c, d in zip(clients, data, strict=True)]
            )
            winners = [o for o in outcomes if isinstance(o, str)]
            assert len(winners) == 1, outcomes
            assert sum(isinstance(o, ManifestConflictError) for o in outcomes) == len(clients) - 1
            version = winners[0]
            assert clients[0].get("m") == (data[outcomes.index(version)], version)

    def test_concurrent_creates_have_one_winner(
        self, harness: StorageHarness, open_storage: Callable[[], ChunkStorage]
    ) -> None:
        if not harness.atomic_conditional_writes:
            pytest.skip(f"{harness.name} as tested does not decide concurrent races itself")
        clients = [open_storage() for _ in range(6)]
        for round_number in range(5):
            key = f"chunk-{round_number}"
            outcomes = at_once([partial(c.create, key, [b"%d" % i]) for i, c in enumerate(clients)])
            created = [i for i, o in enumerate(outcomes) if o is None]
            assert len(created) == 1, outcomes
            assert sum(isinstance(o, ChunkExistsError) for o in outcomes) == len(clients) - 1
            assert clients[0].read(key, 0, 1) == b"%d" % created[0]

    def test_a_large_object(self, storage: ChunkStorage) -> None:
        data = pattern(9 * MIB + 12_345, seed=3)
        # Parts that do not line up with any multipart piece size.
        parts: list[Buffer] = [
            data[:1000],
            memoryview(data)[1000 : 5 * MIB + 7],
            data[5 * MIB + 7 :],
        ]
        storage.create("big", parts)
        assert storage.size("big") == len(data)
        assert storage.read("big", 0, len(data)) == data
        around = 8 * MIB - 100
        assert storage.read("big", around, 300) == data[around : around + 300]
        assert storage.read("big", len(data) - 10, 10) == data[-10:]

    @pytest.mark.parametrize(
        "key", ["", "/abs", "a//b", "a/", "../x", "a/../b", "./a", ".hidden", "a/.lock", "a b", "é"]
    )
    def test_invalid_keys_are_refused(self, storage: ChunkStorage, key: str) -> None:
        calls: list[Callable[[], object]] = [
            lambda: storage.create(key, [b"x"]),
            lambda: storage.read(key, 0, 0),
            lambda: storage.size(key),
            lambda: storage.exists(key),
            lambda: storage.delete(key),
            lambda: storage.get(key),
            lambda: storage.put_if(key, b"x", None),
        ]
        for call in calls:
            with pytest.raises(ValueError):
                call()
        assert storage.list("") == []

    def test_negative_ranges_are_refused(self, storage: ChunkStorage) -> None:
        storage.create("k", [b"abc"])
        for offset, length in ((-1, 1), (0, -1)):
            with pytest.raises(ValueError):
                storage.read("k", offset, length)

    def test_close_is_idempotent_and_final(self, open_storage: Callable[[], ChunkStorage]) -> None:
        storage = open_storage()
        storage.create("k", [b"x"])
        storage.close()
        storage.close()
        with pytest.raises(Tier2ClosedError):
            storage.read("k", 0, 1)
        with pytest.raises(Tier2ClosedError):
            storage.list("")
        assert open_storage().read("k", 0, 1) == b"x"
