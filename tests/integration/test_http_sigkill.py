"""SIGKILL of the HTTP server: acknowledged appends survive, and retries never duplicate.

``segmentstore serve`` runs as a child process. Each round, 16 writers (each its own async
HTTP client) append self-describing records (:mod:`tests.integration.crash_writer`) with
``Writer-Id``/``Writer-Seq`` to several segments; every ``200`` with an offset is recorded.
At a random moment the server is killed with SIGKILL, then started again on the same data
directory, and the test checks, against every acknowledgement of every round:

1. every acknowledged append is there byte for byte at its acknowledged offset;
2. every segment is whole records back to back, and the only record of a writer that may be
   there without an acknowledgement is the one it had in flight at the kill;
3. exactly-once across the restart: each writer resends its in-flight append with the same
   ``Writer-Seq`` (the retry of a lost response); it answers ``duplicate`` exactly when the
   record had survived, and appends it otherwise. Resending acknowledged sequence numbers
   answers ``duplicate`` and changes no byte. No record is ever present twice;
4. every container's epoch grows with each restart.

The restarted server is the next round's victim. Set ``HTTP_CRASH_TEST_SEED`` to replay a
failing run's kill timing and segment choices.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from segmentstore.client import AsyncSegmentStoreClient, RetryPolicy, SegmentStoreClient
from segmentstore.contracts.errors import SegmentExistsError
from segmentstore.harness.served_store import ServedStore

from .crash_writer import RecordError, decode_record, encode_record

ROUNDS = 3
SEGMENTS = 8
WRITERS = 16
KILL_DELAY_S = (0.5, 2.0)
STARTUP_TIMEOUT_S = 60.0
# Acks this shortly before the kill show that appends were flowing when it came.
IN_FLIGHT_WINDOW_S = 0.25
MIN_TOTAL_ACKS = 300
READ_CHUNK = 16 << 20
# Small enough that Tier 1 files roll and checkpoints are written within a round.
SETTINGS = {
    "SEGMENTSTORE_TIER1__SEGMENT_BYTES": str(256 * 1024),
    "SEGMENTSTORE_DURABLE_LOG__CHECKPOINT_EVERY_FRAMES": "20",
    "SEGMENTSTORE_DURABLE_LOG__MAX_FRAME_BYTES": str(64 * 1024),
}
WRITER_RETRY = RetryPolicy(max_attempts=4, initial_backoff_s=0.05, deadline_s=2.0)
SEGMENT_NAMES = [f"http-crash/segment-{i:02d}" for i in range(SEGMENTS)]


@dataclass(frozen=True, slots=True)
class Ack:
    segment: str
    offset: int
    length_after: int
    writer: str
    seq: int


@dataclass(frozen=True, slots=True)
class InFlight:
    """An append sent (or being sent) when the server died: its answer never came."""

    segment: str
    writer: str
    seq: int


@dataclass
class RoundResult:
    acks: list[Ack] = field(default_factory=list)
    in_flight: list[InFlight] = field(default_factory=list)
    ack_times: list[float] = field(default_factory=list)
    kill_time: float = 0.0

    @property
    def acks_before_kill(self) -> int:
        window = self.kill_time - IN_FLIGHT_WINDOW_S
        return sum(window <= t < self.kill_time for t in self.ack_times)


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[list[ServedStore]]:
    """Every server a test starts; whatever is still running at the end is stopped."""
    started: list[ServedStore] = []
    yield started
    for server in started:
        server.stop(timeout_s=30)


def _start(servers: list[ServedStore], data_dir: Path, number: int) -> ServedStore:
    server = ServedStore(
        data_dir, data_dir.parent / f"serve-{number}.log", SETTINGS, environ=os.environ
    )
    servers.append(server)
    server.wait_ready(STARTUP_TIMEOUT_S)
    return server


async def _writer(
    url: str, writer: str, rng: random.Random, result: RoundResult, stop: asyncio.Event
) -> None:
    # Exactly-once appends are retried (a 429 or 503 would be) but give up soon once the
    # server is dead: the append that failed then is the one in flight.
    async with AsyncSegmentStoreClient(url, retry=WRITER_RETRY, timeout_s=30) as client:
        seq = 0
        while not stop.is_set():
            segment = rng.choice(SEGMENT_NAMES)
            record = encode_record(writer, seq)
            try:
                answer = await client.append(segment, record, writer_id=writer, writer_seq=seq)
            except httpx.TransportError:
                result.in_flight.append(InFlight(segment, writer, seq))
                return
            assert not answer.duplicate and answer.offset is not None, (writer, seq, answer)
            assert answer.length == answer.offset + len(record), (writer, seq, answer)
            result.acks.append(Ack(segment, answer.offset, answer.length, writer, seq))
            result.ack_times.append(time.monotonic())
            seq += 1


async def _append_until_killed(
    server: ServedStore, round_no: int, rng: random.Random
) -> RoundResult:
    result = RoundResult()
    stop = asyncio.Event()  # only set if the kill did not end the writers (it always should)
    async with AsyncSegmentStoreClient(server.url) as admin:
        for name in SEGMENT_NAMES:
            with contextlib.suppress(SegmentExistsError):  # made by an earlier round
                await admin.create_segment(name)
    writers = [
        asyncio.create_task(
            _writer(server.url, f"r{round_no}-w{i}", random.Random(rng.random()), result, stop)
        )
        for i in range(WRITERS)
    ]
    try:
        await asyncio.sleep(rng.uniform(*KILL_DELAY_S))
        assert not any(w.done() for w in writers), [w.exception() for w in writers if w.done()]
        result.kill_time = time.monotonic()
        await asyncio.to_thread(server.sigkill)
        done, pending = await asyncio.wait(writers, timeout=60)
        assert not pending, "writers still running 60 s after the kill"
        for task in done:
            task.result()  # an unexpected error fails the test here
    finally:
        stop.set()
        for task in writers:
            task.cancel()
        await asyncio.gather(*writers, return_exceptions=True)
    return result


def _read_segments(client: SegmentStoreClient) -> dict[str, bytes]:
    segments = {}
    for name in client.list_segments("http-crash/"):
        info = client.get_info(name)
        assert info.start_offset == 0, info
        data = bytearray()
        while len(data) < info.length:
            chunk = client.read(name, len(data), max_length=READ_CHUNK).data
            assert chunk, f"{name}: empty read at {len(data)} of {info.length}"
            data += chunk
        segments[name] = bytes(data)
    return segments


# A segment's records by offset: (writer, seq, size).
Records = dict[int, tuple[str, int, int]]


def _parse(name: str, data: bytes, where: str) -> Records:
    records: Records = {}
    offset = 0
    while offset < len(data):
        try:
            writer, seq, size = decode_record(data, offset)
        except RecordError as error:
            pytest.fail(
                f"{where}: {name} (length {len(data)}) has no whole record at {offset}: {error}"
            )
        records[offset] = (writer, seq, size)
        offset += size
    return records


def _verify(
    segments: dict[str, bytes],
    earlier: dict[str, bytes],
    acks: list[Ack],
    may_be_present: set[tuple[str, int]],
    where: str,
) -> dict[tuple[str, int], tuple[str, int]]:
    """Checks 1 and 2; returns where each record is: (writer, seq) -> (segment, offset)."""
    assert sorted(segments) == SEGMENT_NAMES, f"{where}: segments {sorted(segments)}"
    for name, before in earlier.items():
        assert segments[name][: len(before)] == before, (
            f"{where}: {name} changed below its earlier length {len(before)}"
        )
    places: dict[tuple[str, int], tuple[str, int]] = {}
    for name, data in segments.items():
        for offset, (writer, seq, _) in _parse(name, data, where).items():
            assert (writer, seq) not in places, (
                f"{where}: {writer} seq {seq} is at {places[writer, seq]} and at {name}@{offset}"
            )
            places[writer, seq] = (name, offset)
    acked = set()
    for ack in acks:
        assert places.get((ack.writer, ack.seq)) == (ack.segment, ack.offset), (
            f"{where}: {ack} is not at its offset; found {places.get((ack.writer, ack.seq))}"
        )
        acked.add((ack.writer, ack.seq))
    unacked = set(places) - acked
    assert unacked <= may_be_present, (
        f"{where}: records never sent or acked: {unacked - may_be_present}"
    )
    return places


async def _resend(
    url: str,
    in_flight: list[InFlight],
    acks: list[Ack],
    places: dict[tuple[str, int], tuple[str, int]],
    rng: random.Random,
    where: str,
) -> list[Ack]:
    """Check 3: resend in-flight and some acknowledged appends; returns the appends the
    resent in-flight ones made (those whose first attempt had not survived)."""
    appended: list[Ack] = []
    async with AsyncSegmentStoreClient(url) as client:
        for lost in in_flight:
            record = encode_record(lost.writer, lost.seq)
            answer = await client.append(
                lost.segment, record, writer_id=lost.writer, writer_seq=lost.seq
            )
            survived = (lost.writer, lost.seq) in places
            assert answer.duplicate == survived, f"{where}: resent {lost}: {answer}"
            if not answer.duplicate:
                assert answer.offset is not None
                appended.append(
                    Ack(lost.segment, answer.offset, answer.length, lost.writer, lost.seq)
                )
        by_writer: dict[str, list[Ack]] = defaultdict(list)
        for ack in acks:
            by_writer[ack.writer].append(ack)
        for writer_acks in by_writer.values():
            for ack in {writer_acks[-1], rng.choice(writer_acks)}:
                length = (await client.get_info(ack.segment)).length
                answer = await client.append(
                    ack.segment,
                    encode_record(ack.writer, ack.seq),
                    writer_id=ack.writer,
                    writer_seq=ack.seq,
                )
                assert answer.duplicate and answer.offset is None, f"{where}: {ack}: {answer}"
                assert answer.length == length, f"{where}: {ack}: {answer}, length {length}"
    return appended


def _epochs(client: SegmentStoreClient) -> list[int]:
    return [c.epoch for c in client.containers()]


@pytest.mark.slow
@pytest.mark.integration
def test_acknowledged_http_appends_survive_sigkill(
    tmp_path: Path, servers: list[ServedStore]
) -> None:
    seed = int(os.environ.get("HTTP_CRASH_TEST_SEED", random.SystemRandom().randrange(2**32)))
    print(f"HTTP_CRASH_TEST_SEED={seed}")
    rng = random.Random(seed)
    data_dir = tmp_path / "data"
    server = _start(servers, data_dir, 0)
    with SegmentStoreClient(server.url) as client:
        epochs = _epochs(client)
    all_acks: list[Ack] = []
    all_in_flight: set[tuple[str, int]] = set()
    earlier: dict[str, bytes] = {}
    summary = []
    for round_no in range(ROUNDS):
        where = f"[seed={seed} round={round_no}]"
        result = asyncio.run(_append_until_killed(server, round_no, rng))
        all_acks += result.acks
        server = _start(servers, data_dir, round_no + 1)
        in_flight = {(lost.writer, lost.seq) for lost in result.in_flight}
        # Survivors of earlier rounds stay, unacknowledged, for good.
        all_in_flight |= in_flight
        with SegmentStoreClient(server.url) as client:
            new_epochs = _epochs(client)
            assert all(n > o for n, o in zip(new_epochs, epochs, strict=True)), (
                f"{where}: epochs {new_epochs} did not all grow from {epochs}"
            )
            epochs = new_epochs
            segments = _read_segments(client)
            places = _verify(segments, earlier, all_acks, all_in_flight, where)
            survived = len(in_flight & set(places))
            resent = asyncio.run(
                _resend(server.url, result.in_flight, all_acks, places, rng, where)
            )
            all_acks += resent
            # After the resends every in-flight append is there exactly once, and the bytes
            # read before them are unchanged (resends only ever append).
            before_resends = segments
            segments = _read_segments(client)
            places = _verify(segments, before_resends, all_acks, all_in_flight, where)
            assert in_flight <= set(places), f"{where}: resent appends missing"
            earlier = segments
        summary.append((len(result.acks), result.acks_before_kill, len(in_flight), survived))
        print(
            f"round {round_no}: {len(result.acks)} acks, {result.acks_before_kill} in the"
            f" {IN_FLIGHT_WINDOW_S} s before the kill, {len(in_flight)} in flight, of which"
            f" {survived} had survived; epochs {epochs}"
        )
    assert server.stop() is not None
    assert len(all_acks) > MIN_TOTAL_ACKS, f"[seed={seed}] too few: {summary}"
    assert any(before > 0 and flying > 0 for _, before, flying, _ in summary), (
        f"[seed={seed}] no kill landed while appends were flowing: {summary}"
    )
