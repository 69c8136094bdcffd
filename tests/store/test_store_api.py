"""The embedded API of docs/api.md: what each call does, and each error it can raise."""

from __future__ import annotations

import asyncio
import os
import struct
from pathlib import Path

import pytest

from segmentstore import (
    AttributeUpdate,
    BadAttributeUpdateError,
    BadOffsetError,
    ContainerNotFoundError,
    EndOfSegmentError,
    InvalidArgumentError,
    InvalidNameError,
    OffsetBeyondEndError,
    PayloadTooLargeError,
    SegmentExistsError,
    SegmentNotFoundError,
    SegmentSealedError,
    SegmentStore,
    SegmentTruncatedError,
    ThrottledError,
    UpdateType,
)
from segmentstore.contracts.mapping import container_of


async def read_all(store: SegmentStore, name: str, offset: int = 0) -> bytes:
    info = await store.get_info(name)
    out = bytearray()
    while offset + len(out) < info.length:
        out += await store.read(name, offset + len(out), 1 << 20)
    return bytes(out)


async def test_append_read_and_info(store: SegmentStore) -> None:
    info = await store.create_segment("scope/stream/0")
    assert (info.length, info.start_offset, info.sealed, info.container) == (0, 0, False, 3)
    first = await store.append("scope/stream/0", b"hello ")
    second = await store.append("scope/stream/0", b"world")
    assert (first.offset, first.length) == (0, 6)
    assert (second.offset, second.length) == (6, 11)
    assert await read_all(store, "scope/stream/0") == b"hello world"
    assert bytes(await store.read("scope/stream/0", 3, max_length=4)) == b"lo w"
    info = await store.get_info("scope/stream/0")
    assert info.length == 11 and info.storage_length == 0
    assert info.created_ms <= info.last_modified_ms


@pytest.mark.parametrize(
    "name",
    ["", "/a", "a/", "a//b", "a/./b", "../x", "a/..", "sp ace", "x" * 256, "é", "a\x00b", 7],
)
async def test_invalid_names_are_refused_before_storage(store: SegmentStore, name: object) -> None:
    with pytest.raises(InvalidNameError):
        await store.create_segment(name)  # type: ignore[arg-type]
    with pytest.raises(InvalidNameError):
        await store.append(name, b"x")  # type: ignore[arg-type]
    assert await store.list_segments() == []


async def test_valid_unusual_names(store: SegmentStore) -> None:
    for name in ["a", "x" * 255, "A-z_0.9~#/b", "scope/stream/0#transaction.abc"]:
        if "#transaction." in name:
            await store.create_segment("scope/stream/0")
        await store.create_segment(name)
    assert len(await store.list_segments()) == 5


async def test_missing_segment_errors(store: SegmentStore) -> None:
    calls = [
        store.append("nope", b"x"),
        store.read("nope", 0),
        store.seal("nope"),
        store.truncate("nope", 0),
        store.delete_segment("nope"),
        store.get_info("nope"),
        store.get_attributes("nope"),
        store.update_attributes("nope", [AttributeUpdate("k", 1)]),
        store.begin_transaction("nope"),
    ]
    for call in calls:
        with pytest.raises(SegmentNotFoundError):
            await call


async def test_create_twice_and_recreate_after_delete(store: SegmentStore) -> None:
    await store.create_segment("s")
    await store.append("s", b"abc")
    with pytest.raises(SegmentExistsError):
        await store.create_segment("s")
    await store.delete_segment("s")
    with pytest.raises(SegmentNotFoundError):
        await store.delete_segment("s")
    info = await store.create_segment("s")
    assert info.length == 0
    assert await read_all(store, "s") == b""


async def test_append_arguments(store: SegmentStore) -> None:
    await store.create_segment("s")
    with pytest.raises(InvalidArgumentError):
        await store.append("s", b"")
    limit = store.settings.store.max_append_bytes
    with pytest.raises(PayloadTooLargeError) as too_large:
        await store.append("s", bytes(limit + 1))
    assert too_large.value.fields() == {"limit": limit}
    with pytest.raises(InvalidArgumentError):
        await store.append("s", b"x", expected_offset=-1)
    with pytest.raises(InvalidArgumentError):
        await store.append("s", b"x", writer_id="w")
    assert (await store.get_info("s")).length == 0
    assert (await store.append("s", bytes(limit))).length == limit


async def test_conditional_append(store: SegmentStore) -> None:
    await store.create_segment("s")
    assert (await store.append("s", b"ab", expected_offset=0)).offset == 0
    with pytest.raises(BadOffsetError) as refused:
        await store.append("s", b"cd", expected_offset=0)
    assert refused.value.fields() == {"expected_offset": 0, "length": 2}
    assert (await store.append("s", b"cd", expected_offset=2)).offset == 2
    assert await read_all(store, "s") == b"abcd"


async def test_exactly_once_appends(store: SegmentStore) -> None:
    await store.create_segment("s")
    r1 = await store.append("s", b"one", writer_id="w", writer_seq=1)
    dup = await store.append("s", b"one", writer_id="w", writer_seq=1)
    older = await store.append("s", b"zero", writer_id="w", writer_seq=0)
    r2 = await store.append("s", b"two", writer_id="w", writer_seq=2)
    other = await store.append("s", b"x", writer_id="other", writer_seq=1)
    assert (r1.offset, r1.duplicate) == (0, False)
    assert (dup.offset, dup.length, dup.duplicate) == (None, 3, True)
    assert older.duplicate and not r2.duplicate and not other.duplicate
    assert await read_all(store, "s") == b"onetwox"


async def test_concurrent_appends_never_interleave(store: SegmentStore) -> None:
    await store.create_segment("s")
    writers, per_writer = 32, 40

    async def writer(w: int) -> list[tuple[int, int]]:
        acks = []
        for seq in range(per_writer):
            body = bytes([w]) * (1 + (seq * 37 + w) % 3000)
            record = struct.pack("<HHI", w, seq, len(body)) + body
            acks.append(((await store.append("s", record)).offset or 0, seq))
        return acks

    results = await asyncio.gather(*(writer(w) for w in range(writers)))
    data = await read_all(store, "s")
    position, seen = 0, 0
    while position < len(data):
        w, seq, size = struct.unpack_from("<HHI", data, position)
        body = data[position + 8 : position + 8 + size]
        assert body == bytes([w]) * size, f"interleaved bytes at {position}"
        assert (position, seq) in results[w]
        position += 8 + size
        seen += 1
    assert seen == writers * per_writer
    for acks in results:  # one writer's appends land in acknowledgement order
        assert [o for o, _ in acks] == sorted(o for o, _ in acks)


async def test_seal(store: SegmentStore) -> None:
    await store.create_segment("s")
    await store.append("s", b"abc")
    assert (await store.seal("s")).sealed
    assert (await store.seal("s")).sealed  # idempotent
    with pytest.raises(SegmentSealedError):
        await store.append("s", b"x")
    with pytest.raises(EndOfSegmentError) as end:
        await store.read("s", 3)
    assert end.value.fields() == {"length": 3}
    assert bytes(await store.read("s", 1)) == b"bc"


async def test_truncate(store: SegmentStore) -> None:
    await store.create_segment("s")
    await store.append("s", b"0123456789")
    assert (await store.truncate("s", 4)).start_offset == 4
    assert (await store.truncate("s", 2)).start_offset == 4  # below the start: no-op
    with pytest.raises(SegmentTruncatedError) as truncated:
        await store.read("s", 3)
    assert truncated.value.fields() == {"start_offset": 4}
    assert bytes(await store.read("s", 4)) == b"456789"
    with pytest.raises(OffsetBeyondEndError):
        await store.truncate("s", 11)
    assert (await store.truncate("s", 10)).start_offset == 10
    with pytest.raises(InvalidArgumentError):
        await store.truncate("s", -1)


async def test_read_arguments(store: SegmentStore) -> None:
    await store.create_segment("s")
    await store.append("s", b"abc")
    with pytest.raises(OffsetBeyondEndError):
        await store.read("s", 4)
    for bad in ({"offset": -1}, {"offset": 0, "max_length": 0}, {"offset": 0, "wait_ms": -5}):
        with pytest.raises(InvalidArgumentError):
            await store.read("s", **bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        await store.read("s", 0, wait_ms=store.settings.store.max_wait_ms + 1)
    assert await store.read("s", 3) == b""  # the tail of an unsealed segment, no wait


async def test_tail_read_waits_for_the_next_append(store: SegmentStore) -> None:
    await store.create_segment("s")
    reader = asyncio.create_task(store.read("s", 0, wait_ms=10_000))
    await asyncio.sleep(0.05)
    assert not reader.done()
    await store.append("s", b"news")
    assert bytes(await asyncio.wait_for(reader, 5)) == b"news"
    started = asyncio.get_running_loop().time()
    assert await store.read("s", 4, wait_ms=100) == b""
    assert asyncio.get_running_loop().time() - started >= 0.09


async def test_tail_read_ends_on_seal_and_delete(store: SegmentStore) -> None:
    await store.create_segment("s")
    await store.create_segment("t")
    sealed = asyncio.create_task(store.read("s", 0, wait_ms=10_000))
    deleted = asyncio.create_task(store.read("t", 0, wait_ms=10_000))
    await asyncio.sleep(0.05)
    await store.seal("s")
    await store.delete_segment("t")
    with pytest.raises(EndOfSegmentError):
        await asyncio.wait_for(sealed, 5)
    with pytest.raises(SegmentNotFoundError):
        await asyncio.wait_for(deleted, 5)


async def test_transaction_commit_and_abort(store: SegmentStore) -> None:
    await store.create_segment("scope/stream/0")
    await store.append("scope/stream/0", b"head-")
    txn = await store.begin_transaction("scope/stream/0")
    assert txn.startswith("scope/stream/0#transaction.")
    assert (await store.get_info(txn)).container == (
        await store.get_info("scope/stream/0")
    ).container
    await store.append(txn, b"txn-1 ")
    await store.append(txn, b"txn-2")
    merged = await store.merge("scope/stream/0", txn)
    assert (merged.offset, merged.length) == (5, 16)
    assert await read_all(store, "scope/stream/0") == b"head-txn-1 txn-2"
    with pytest.raises(SegmentNotFoundError):
        await store.get_info(txn)
    aborted = await store.begin_transaction("scope/stream/0")
    await store.append(aborted, b"never")
    await store.delete_segment(aborted)
    assert (await store.get_info("scope/stream/0")).length == 16


async def test_refused_merges_leave_the_source_intact(store: SegmentStore) -> None:
    await store.create_segment("p")
    source = await store.begin_transaction("p")
    await store.append(source, b"payload")
    await store.seal("p")
    with pytest.raises(SegmentSealedError):
        await store.merge("p", source)
    assert await read_all(store, source) == b"payload"

    await store.create_segment("q")
    truncated = await store.begin_transaction("q")
    await store.append(truncated, b"abcdef")
    await store.truncate(truncated, 2)
    with pytest.raises(SegmentTruncatedError):
        await store.merge("q", truncated)
    assert bytes(await store.read(truncated, 2)) == b"cdef"
    with pytest.raises(InvalidArgumentError):
        await store.merge("q", "q")


async def test_merge_across_containers_is_refused(store: SegmentStore) -> None:
    count = store.settings.store.containers
    a, b = (
        "foo",
        next(
            n for n in ("a", "b", "c", "d") if container_of(n, count) != container_of("foo", count)
        ),
    )
    # A missing target or source is 404 before the container rule is looked at.
    with pytest.raises(SegmentNotFoundError) as missing:
        await store.merge(a, b)
    assert missing.value.name == a
    await store.create_segment(a)
    with pytest.raises(SegmentNotFoundError) as missing:
        await store.merge(a, b)
    assert missing.value.name == b
    await store.create_segment(b)
    with pytest.raises(InvalidArgumentError):
        await store.merge(a, b)


async def test_attributes(store: SegmentStore) -> None:
    await store.create_segment("s", attributes={"created": 1})
    assert await store.get_attributes("s") == {"created": 1}
    updated = await store.update_attributes(
        "s",
        [
            {"key": "a", "value": 5},
            {"key": "b", "value": 1, "type": "replace_if_absent"},
            {"key": "c", "value": 10, "type": "accumulate"},
            {"key": "c", "value": -3, "type": "accumulate"},
            {"key": "d", "value": 2, "type": "replace_if_greater"},
            {"key": "e", "value": 7, "type": "replace_if_equals", "compare": None},
        ],
    )
    assert updated == {"created": 1, "a": 5, "b": 1, "c": 7, "d": 2, "e": 7}
    failing = [
        {"key": "b", "value": 2, "type": "replace_if_absent"},
        {"key": "d", "value": 2, "type": "replace_if_greater"},
        {"key": "e", "value": 8, "type": "replace_if_equals", "compare": 6},
        {"key": "c", "value": (1 << 63) - 1, "type": "accumulate"},
    ]
    for update in failing:
        with pytest.raises(BadAttributeUpdateError) as refused:
            # The first update would succeed; the batch is all or nothing.
            await store.update_attributes("s", [{"key": "a", "value": 99}, update])
        assert refused.value.fields() == {"key": update["key"]}
    assert await store.get_attributes("s") == updated
    assert (
        await store.update_attributes(
            "s", [AttributeUpdate("e", 9, UpdateType.REPLACE_IF_EQUALS, compare=7)]
        )
    )["e"] == 9


@pytest.mark.parametrize(
    "update",
    [
        {"key": "", "value": 1},
        {"key": "bad key", "value": 1},
        {"key": "k", "value": 1 << 63},
        {"key": "k", "value": "1"},
        {"key": "k", "value": 1, "type": "nope"},
        {"key": "k", "value": 1, "extra": 1},
        "not an object",
    ],
)
async def test_bad_attribute_updates_are_invalid_arguments(
    store: SegmentStore, update: object
) -> None:
    await store.create_segment("s")
    with pytest.raises(InvalidArgumentError):
        await store.update_attributes("s", [update])  # type: ignore[list-item]
    assert await store.get_attributes("s") == {}


async def test_retention_policy_is_validated_and_kept(store: SegmentStore) -> None:
    info = await store.create_segment("s", retention={"time_ms": 1000, "bytes": 10})
    assert info.retention == {"time_ms": 1000, "bytes": 10}
    with pytest.raises(InvalidArgumentError):
        await store.create_segment("t", retention={"size": 1})
    with pytest.raises(InvalidArgumentError):
        await store.create_segment("t", retention={"bytes": -1})


async def test_list_segments(store: SegmentStore) -> None:
    names = ["b/1", "a/2", "a/1", "a/10", "c", "a/1#transaction.x"]
    for name in names[:5]:
        await store.create_segment(name)
    await store.create_segment(names[5])
    assert await store.list_segments() == sorted(names)
    assert await store.list_segments("a/") == ["a/1", "a/1#transaction.x", "a/10", "a/2"]
    assert await store.list_segments("a/", after="a/1#transaction.x", limit=1) == ["a/10"]


async def test_containers(store: SegmentStore) -> None:
    assert [c.id for c in store.containers] == [0, 1, 2, 3]
    with pytest.raises(ContainerNotFoundError):
        store.container(4)
    before = store.container(1).epoch
    await store.create_segment("a")  # container 0
    restarted = await store.restart_container(1)
    assert restarted.epoch > before and restarted.status.value == "running"
    assert (await store.get_info("a")).length == 0


async def test_back_pressure_throttles_instead_of_growing(tmp_path: Path) -> None:
    async with SegmentStore.open(
        tmp_path,
        store={"max_append_bytes": 1 << 20},
        durable_log={"max_in_flight_bytes": 1 << 20, "throttle_max_delay_ms": 0},
    ) as store:
        await store.create_segment("s")
        payload = os.urandom(1 << 20)
        results = await asyncio.gather(
            *(store.append("s", payload) for _ in range(8)), return_exceptions=True
        )
        throttled = [r for r in results if isinstance(r, ThrottledError)]
        assert throttled and throttled[0].fields() == {"retry_after_ms": 1000}
        acknowledged = [r for r in results if not isinstance(r, BaseException)]
        assert (await store.get_info("s")).length == len(acknowledged) << 20


async def test_everything_survives_close_and_reopen(tmp_path: Path) -> None:
    async with SegmentStore.open(tmp_path) as store:
        await store.create_segment("kept", attributes={"x": 1})
        await store.append("kept", b"abc", writer_id="w", writer_seq=4)
        await store.append("kept", b"def")
        await store.truncate("kept", 1)
        await store.seal("kept")
        await store.create_segment("gone")
        await store.delete_segment("gone")
        epochs = [c.epoch for c in store.containers]
    async with SegmentStore.open(tmp_path) as store:
        info = await store.get_info("kept")
        assert (info.start_offset, info.length, info.sealed) == (1, 6, True)
        assert info.attributes == {"x": 1}
        assert bytes(await store.read("kept", 1)) == b"bcdef"
        assert (await store.append("kept", b"abc", writer_id="w", writer_seq=4)).duplicate
        assert await store.list_segments() == ["kept"]
        assert all(c.epoch > e for c, e in zip(store.containers, epochs, strict=True))


async def test_container_count_is_fixed_by_the_data(tmp_path: Path) -> None:
    async with SegmentStore.open(tmp_path, containers=4):
        pass
    with pytest.raises(InvalidArgumentError, match="container count"):
        async with SegmentStore.open(tmp_path, containers=8):
            pass


async def test_a_transaction_of_a_transaction_commits_into_it(store: SegmentStore) -> None:
    await store.create_segment("p")
    outer = await store.begin_transaction("p")
    inner = await store.begin_transaction(outer)
    assert inner.startswith(f"{outer}#transaction.")
    await store.append(inner, b"inner")
    await store.merge(outer, inner)
    await store.merge("p", outer)
    assert await read_all(store, "p") == b"inner"
