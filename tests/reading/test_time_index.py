"""The sparse time index, ``:offsetAt`` and retention, on a real store with a local Tier 2.

``offset_at`` is held to docs/api.md's guarantee against a record of when each append was sent
and acknowledged: appends are written in phases separated by quiet gaps, and each question is
asked for a time ``T`` inside a gap, so every append is plainly made before ``T`` (acknowledged
before it) or at or after it (sent after it). The answer ``O`` must be at or below every append
made at or after ``T``, with at most one index interval of earlier appends between ``O`` and the
first of them. The same holds for data in the Tier 1 tail, in Tier 2 only (sidecars), across a
restart, and across a merge.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from store_checks import flush

from segmentstore import InvalidArgumentError, SegmentNotFoundError, SegmentStore
from segmentstore.contracts.events import HEADER as EVENT_HEADER
from segmentstore.contracts.mapping import container_of
from segmentstore.metadata.time_index import SegmentTimeIndex
from segmentstore.tier2 import (
    SegmentReader,
    open_chunk_storage,
)

KiB = 1024
MiB = 1024 * KiB
INTERVAL = 4 * KiB
GAP_S = 0.03
# Tier 2 catches up only when a test says so (flush), in chunks a few appends long.
WRITER = {
    "flush_threshold_bytes": 64 * MiB,
    "flush_interval_ms": 600_000,
    "max_chunk_bytes": 16 * KiB,
}


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True)
class Ack:
    offset: int
    length: int
    sent_ms: int
    acked_ms: int


def open_store(data: Path, **overrides: Any) -> SegmentStore:
    writer = {**WRITER, **overrides.pop("storage_writer", {})}
    store = {"time_index_interval_bytes": INTERVAL, **overrides.pop("store", {})}
    return SegmentStore.open(data, storage_writer=writer, store=store, **overrides)


async def write_phases(
    store: SegmentStore, name: str, rng: random.Random, phases: int = 5, per_phase: int = 12
) -> tuple[list[Ack], list[int]]:
    """Appends in ``phases`` separated by quiet gaps; returns the acks and one time inside
    each gap."""
    acks: list[Ack] = []
    gaps: list[int] = []
    for phase in range(phases):
        if phase:
            await asyncio.sleep(GAP_S)
            gaps.append(now_ms())
            await asyncio.sleep(GAP_S)
        for _ in range(per_phase):
            payload = rng.randbytes(rng.randint(100, 1500))
            sent = now_ms()
            result = await store.append(name, payload)
            assert result.offset is not None
            acks.append(Ack(result.offset, len(payload), sent, now_ms()))
    return acks, gaps


def check_guarantee(answer: int, at_ms: int, acks: list[Ack], start_offset: int = 0) -> None:
    """docs/api.md's promise for ``:offsetAt``: ``answer`` at or below every append made at or after
    ``at_ms``, with at most one interval of earlier appends between it and the first of them."""
    made_after = [a for a in acks if a.sent_ms >= at_ms]
    made_before = [a for a in acks if a.acked_ms < at_ms]
    assert len(made_after) + len(made_before) == len(acks), "an append straddles the time"
    boundaries = {a.offset for a in acks} | {start_offset, acks[-1].offset + acks[-1].length}
    assert answer in boundaries, f"{answer} is not an append boundary"
    assert all(a.offset >= answer for a in made_after), (answer, at_ms)
    first = min((a.offset for a in made_after), default=acks[-1].offset + acks[-1].length)
    earlier = sum(a.length for a in made_before if answer <= a.offset < first)
    assert earlier <= INTERVAL, f"{earlier} bytes of earlier appends between {answer} and {first}"


async def check_all(store: SegmentStore, name: str, acks: list[Ack], gaps: list[int]) -> list[int]:
    answers = [await store.offset_at(name, t) for t in gaps]
    for answer, t in zip(answers, gaps, strict=True):
        check_guarantee(answer, t, acks)
    end = acks[-1].offset + acks[-1].length
    assert await store.offset_at(name, 0) == 0  # everything was made after the epoch
    assert await store.offset_at(name, now_ms() + 1000) == end  # nothing made after it yet
    return answers


def time_index_of(store: SegmentStore, name: str) -> SegmentTimeIndex:
    return store.containers[container_of(name, len(store.containers))].time_index(name)


# -- offsetAt -------------------------------------------------------------------------------


async def test_offset_at_on_the_tier1_tail(tmp_path: Path) -> None:
    async with open_store(tmp_path / "data") as store:
        name = "time/tail"
        await store.create_segment(name)
        acks, gaps = await write_phases(store, name, random.Random(1))
        assert (await store.get_info(name)).storage_length == 0  # all of it in the tail
        index = time_index_of(store, name)
        # Entries are more than (interval - largest append) apart, and at most an interval.
        assert acks[-1].offset // INTERVAL <= len(index.offsets)
        assert len(index.offsets) <= acks[-1].offset // (INTERVAL - 1500) + 1
        await check_all(store, name, acks, gaps)


async def test_offset_at_on_data_only_in_tier2(tmp_path: Path) -> None:
    data = tmp_path / "data"
    name = "time/tier2"
    async with open_store(data) as store:
        await store.create_segment(name)
        acks, gaps = await write_phases(store, name, random.Random(2))
        await flush(store)
    async with open_store(data) as store:
        info = await store.get_info(name)
        assert info.storage_length == info.length
        # Nothing in memory: every answer comes from the chunks' sidecars.
        assert len(time_index_of(store, name).offsets) == 0
        answers = await check_all(store, name, acks, gaps)
    reader = SegmentReader(open_chunk_storage((data / "tier2").as_uri()))
    manifest = reader.list_segments(name)[0]
    assert len(manifest.chunks) > 3
    entries = [e for chunk in manifest.chunks for e in reader.time_index(chunk)]
    assert [e.offset for e in entries] == sorted({e.offset for e in entries})
    assert all(a.time_ms <= b.time_ms for a, b in itertools.pairwise(entries))
    assert set(answers) <= {e.offset for e in entries}


async def test_offset_at_across_a_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    name = "time/restart"
    async with open_store(data) as store:
        await store.create_segment(name)
        acks, gaps = await write_phases(store, name, random.Random(3), phases=3)
        await flush(store)  # part in Tier 2, part only in the tail
        more, later_gaps = await write_phases(store, name, random.Random(4), phases=3)
        acks += more
        gaps += later_gaps
        before = await check_all(store, name, acks, gaps)
    async with open_store(data) as store:
        assert await check_all(store, name, acks, gaps) == before
        container = store.containers[container_of(name, 4)]
        await store.restart_container(container.id)  # replayed from the last checkpoint
        assert await check_all(store, name, acks, gaps) == before


async def test_offset_at_treats_a_merge_as_one_append_made_when_merged(tmp_path: Path) -> None:
    """The transaction's bytes were appended earlier, but to the target they arrive at the
    merge: an answer for a time just before the merge must not skip them."""
    data = tmp_path / "data"
    target = "time/merge"
    rng = random.Random(5)
    async with open_store(data) as store:
        await store.create_segment(target)
        txn = await store.begin_transaction(target)
        for _ in range(30):
            await store.append(txn, rng.randbytes(1000))
        await flush(store)  # the transaction's chunks and sidecars exist before the merge
        acks, _ = await write_phases(store, target, rng, phases=1)
        await asyncio.sleep(GAP_S)
        before_merge = now_ms()
        await asyncio.sleep(GAP_S)
        merged = await store.merge(target, txn)
        assert merged.offset is not None
        await flush(store)
    async with open_store(data) as store:
        await store.get_info(target)  # reads the manifest: the tail's entries are in Tier 2
        assert len(time_index_of(store, target).offsets) == 0  # answered from Tier 2
        answer = await store.offset_at(target, before_merge)
        # At or before the merged bytes, with at most an interval of the target's own
        # earlier appends in between.
        assert answer in {a.offset for a in acks} | {merged.offset}
        assert 0 <= merged.offset - answer <= INTERVAL
        assert await store.offset_at(target, now_ms()) == merged.length


async def test_offset_at_validates_its_arguments(tmp_path: Path) -> None:
    async with open_store(tmp_path / "data") as store:
        with pytest.raises(SegmentNotFoundError):
            await store.offset_at("time/none", 0)
        await store.create_segment("time/empty")
        assert await store.offset_at("time/empty", now_ms()) == 0
        with pytest.raises(InvalidArgumentError):
            await store.offset_at("time/empty", 1 << 70)


# -- retention ------------------------------------------------------------------------------


async def write_event_phases(
    store: SegmentStore, name: str, rng: random.Random, phases: int
) -> tuple[list[list[bytes]], list[int], list[int]]:
    """Event batches in phases; returns the events per phase, each phase's first offset and a
    time inside each gap before a phase."""
    events: list[list[bytes]] = []
    starts: list[int] = []
    gaps: list[int] = []
    for phase in range(phases):
        if phase:
            await asyncio.sleep(GAP_S)
            gaps.append(now_ms())
            await asyncio.sleep(GAP_S)
        batch_events: list[bytes] = []
        for batch in range(6):
            # Events of every size, some spanning chunks; batches of several events.
            payloads = [rng.randbytes(rng.choice((10, 700, 5000, 20_000))) for _ in range(3)]
            result = await store.append_events(name, payloads)
            if batch == 0:
                assert result.offset is not None
                starts.append(result.offset)
            batch_events += payloads
        events.append(batch_events)
    return events, starts, gaps


async def events_from(store: SegmentStore, name: str, offset: int) -> list[bytes]:
    """Every event from ``offset`` on; fails unless ``offset`` is an event boundary."""
    found: list[bytes] = []
    length = (await store.get_info(name)).length
    while offset < length:
        read = await store.read_events(name, offset, max_bytes=64 * KiB)
        position = 0
        while position < len(read.data):
            kind, size = EVENT_HEADER.unpack_from(read.data, position)
            assert kind == 0
            found.append(read.data[position + 8 : position + 8 + size])
            position += 8 + size
        offset = read.next_offset
    return found


def chunk_keys(data: Path, name: str) -> list[str]:
    reader = SegmentReader(open_chunk_storage((data / "tier2").as_uri()))
    return [c.key for c in reader.list_segments(name)[0].chunks]


async def test_time_retention_truncates_at_event_boundaries_and_deletes_chunks(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    name = "retention/time"
    async with open_store(data) as store:
        await store.create_segment(name, retention={"time_ms": 60_000})
        events, starts, gaps = await write_event_phases(store, name, random.Random(6), 4)
        await flush(store)
        chunks_before = chunk_keys(data, name)
        enforcer = store.containers[container_of(name, 4)].retention
        assert enforcer is not None

        await enforcer.enforce(now_ms=gaps[1] + 60_000)  # phases 0 and 1 have expired
        # Found late by at least the time since phase 0's first append expired.
        assert enforcer.lag_ms >= gaps[1] - gaps[0]
        info = await store.get_info(name)
        assert starts[1] < info.start_offset <= starts[2]
        # Earlier data kept is at most one interval (plus the append that crosses it).
        assert starts[2] - info.start_offset <= INTERVAL + 3 * (20_000 + 8)
        kept = await events_from(store, name, info.start_offset)
        assert kept[-len(events[2]) - len(events[3]) :] == events[2] + events[3]
        await flush(store)
        chunks_after = chunk_keys(data, name)
        assert chunks_after == chunks_before[-len(chunks_after) :]
        assert len(chunks_after) < len(chunks_before)
        reader = SegmentReader(open_chunk_storage((data / "tier2").as_uri()))
        manifest = reader.list_segments(name)[0]
        assert manifest.chunks[0].start_offset <= info.start_offset < manifest.chunks[0].end_offset
        assert enforcer.truncated_bytes == info.start_offset

        # Everything expired: the segment is emptied, at its length.
        await enforcer.enforce(now_ms=now_ms() + 60_001)
        info = await store.get_info(name)
        assert info.start_offset == info.length


async def test_size_retention_keeps_at_least_the_last_bytes(tmp_path: Path) -> None:
    data = tmp_path / "data"
    name = "retention/size"
    keep = 50_000
    async with open_store(data) as store:
        await store.create_segment(name)
        events, _, _ = await write_event_phases(store, name, random.Random(7), 3)
        await flush(store)
        await store.append_events(name, [b"tail" * 100])  # some of it only in the tail
        await store.set_retention(name, {"bytes": keep})
        enforcer = store.containers[container_of(name, 4)].retention
        assert enforcer is not None
        await enforcer.enforce()
        info = await store.get_info(name)
        assert info.retention == {"bytes": keep}
        assert keep <= info.length - info.start_offset <= keep + INTERVAL + 3 * (20_000 + 8)
        everything = [e for phase in events for e in phase] + [b"tail" * 100]
        kept = await events_from(store, name, info.start_offset)
        assert kept == everything[-len(kept) :]
        await enforcer.enforce()  # nothing more to drop
        assert (await store.get_info(name)).start_offset == info.start_offset


async def test_retention_runs_by_itself_and_is_visible(tmp_path: Path) -> None:
    data = tmp_path / "data"
    name = "retention/background"
    async with open_store(data, store={"retention_check_interval_ms": 50}) as store:
        await store.create_segment(name, retention={"time_ms": 0})
        await store.append_events(name, [b"x" * 100] * 10)
        container = store.containers[container_of(name, 4)]
        deadline = time.monotonic() + 10
        while container.retention_truncated_bytes < 1080:
            assert time.monotonic() < deadline, "retention never truncated"
            await asyncio.sleep(0.05)
        info = await store.get_info(name)
        assert info.start_offset == info.length == 1080
        assert container.retention_truncated_bytes == 1080


async def test_an_idle_segments_chunk_rolls_by_age(tmp_path: Path) -> None:
    data = tmp_path / "data"
    name = "roll/idle"
    age = {"max_chunk_age_ms": 300, "max_chunk_bytes": 1 * MiB}
    async with open_store(data, storage_writer=age) as store:
        await store.create_segment(name)
        await store.append(name, b"a" * 1000)
        await flush(store)
        await store.append(name, b"b" * 1000)
        await flush(store)
        assert len(chunk_keys(data, name)) == 1  # young: appended to
        await asyncio.sleep(0.4)
        await store.append(name, b"c" * 1000)
        await flush(store)
        chunks = chunk_keys(data, name)
        assert len(chunks) == 2  # old enough: a new chunk
        # ...so a truncation past the old data frees it whole.
        await store.truncate(name, 2000)
        await flush(store)
        assert chunk_keys(data, name) == chunks[1:]


# -- the index itself -----------------------------------------------------------------------


def test_entries_are_at_most_an_interval_apart_and_never_go_back_in_time() -> None:
    index = SegmentTimeIndex()
    offset, times = 0, [5, 5, 4, 9, 3, 10]  # a clock that steps back is clamped
    for i in range(60):
        size = 700 if i % 7 else 9000  # some single appends larger than the interval
        index.record(offset, offset + size, times[i % len(times)] + i // len(times) * 10, 4096)
        offset += size
    offsets, stamps = list(index.offsets), list(index.times)
    assert offsets[0] == 0
    # An interval apart at most, or one append apart where that append is larger.
    assert all(b - a <= 4096 or b - a == 9000 for a, b in itertools.pairwise(offsets))
    assert stamps == sorted(stamps)
    index.forget_below(offsets[3])
    assert list(index.offsets) == offsets[3:]
    restored = SegmentTimeIndex.from_json(index.to_json())
    assert list(restored.offsets) == offsets[3:] and list(restored.times) == stamps[3:]
    assert restored.last_entry_offset == index.last_entry_offset
