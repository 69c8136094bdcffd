"""SIGKILL recovery: acknowledged appends survive a killed process, whole and in order.

Each round starts :mod:`tests.integration.crash_writer` on the same data directory, lets many
concurrent writers append to many segments for a random while, kills the process with SIGKILL
and then recovers the store in this process to check, against every acknowledgement printed so
far (all rounds):

1. every acknowledged append is present byte for byte at its acknowledged offset;
2. every segment is whole records back to back from 0 to its length: unacknowledged appends
   may have survived, but never a torn one and never garbage;
3. each writer's appends are in order: within a segment a higher sequence number sits at a
   higher offset, no record appears twice, and the only record of a writer that may exist
   without an acknowledgement is the one it had in flight when it was killed;
4. every container's epoch grows from round to round;
5. segments truncated right behind their last append (in a container of their own, whose
   Tier 1 is therefore truncated again and again while the process is killed) start at or
   after their last acknowledged truncation, hold whole records from there on, and still hold
   the last acknowledged record unless a later, unacknowledged truncation passed it.

Set ``CRASH_TEST_SEED`` to replay a failing run's kill timing and segment choices.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import nats
import pytest

from segmentstore import SegmentStore

from .crash_writer import (
    CONTAINERS,
    TRIMMED_CONTAINER,
    RecordError,
    decode_record,
    store_options,
    trimmed_names,
)
from .victim_output import Ack, VictimOutput

REPO = Path(__file__).resolve().parents[2]
ROUNDS = 5
SEGMENTS = 12
WRITERS = 16
MIN_TOTAL_ACKS = 1000
KILL_DELAY_S = (0.3, 2.0)
# Acks arriving this shortly before the kill show the writers were still appending when it came.
IN_FLIGHT_WINDOW_S = 0.25
STARTUP_TIMEOUT_S = 30.0


@dataclass(slots=True)
class _Round:
    acks: list[Ack]
    trims: list[Ack]
    # Acks read in the IN_FLIGHT_WINDOW_S before the kill: appends were flowing at that moment.
    acks_before_kill: int
    # Records of this round's writers that survived without an ack: they were in flight (sent
    # to the store, not yet answered) at the kill. Direct proof of a kill amid appends.
    unacked_present: int = 0


def _parse_acks(lines: list[tuple[float, str]], kill_time: float, where: str) -> _Round:
    texts = [line for _, line in lines]
    assert texts and texts[0] == "READY", f"{where}: output does not start with READY: {texts[:3]}"
    acks: list[Ack] = []
    trims: list[Ack] = []
    before_kill = 0
    for arrived, line in lines[1:]:
        parts = line.split(" ")
        assert len(parts) == 6 and parts[0] in ("ACK", "TRIM"), f"{where}: unexpected {line!r}"
        kind, segment, offset, length_after, writer, seq = parts
        ack = Ack(segment, int(offset), int(length_after), writer, int(seq))
        (acks if kind == "ACK" else trims).append(ack)
        if kill_time - IN_FLIGHT_WINDOW_S <= arrived < kill_time:
            before_kill += 1
    return _Round(acks, trims, before_kill)


def _run_writer_round(
    data_dir: Path, round_no: int, seed: int, rng: random.Random, jetstream: str | None
) -> _Round:
    where = f"[seed={seed} round={round_no}]"
    stderr_path = data_dir.parent / f"writer-round-{round_no}.stderr"
    with open(stderr_path, "wb") as stderr:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-u",
                "-m",
                "tests.integration.crash_writer",
                str(data_dir),
                f"--segments={SEGMENTS}",
                f"--writers={WRITERS}",
                f"--round={round_no}",
                f"--seed={seed}",
                *([f"--jetstream={jetstream}"] if jetstream else []),
            ],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=stderr,
        )
    assert proc.stdout is not None
    output = VictimOutput(proc.stdout, "crash-writer")
    try:
        output.ready.wait(STARTUP_TIMEOUT_S)
        if proc.poll() is not None or not any(line == "READY" for _, line in output.lines):
            pytest.fail(
                f"{where}: the writer did not become ready (exit {proc.poll()}):\n"
                + stderr_path.read_text(errors="replace")
            )
        time.sleep(rng.uniform(*KILL_DELAY_S))
        if proc.poll() is not None:
            pytest.fail(
                f"{where}: the writer exited on its own with {proc.returncode}:\n"
                + stderr_path.read_text(errors="replace")
            )
        kill_time = time.monotonic()
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL, f"{where}: exit {proc.returncode}"
        # Everything the child wrote before it died is still in the pipe: drain it all.
        assert output.join(timeout=30), f"{where}: no EOF on the killed writer's stdout"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        # The reader must be done with the pipe before it is closed under it.
        if output.join(timeout=30):
            proc.stdout.close()
    assert output.torn_tail is None, f"{where}: torn stdout line {output.torn_tail!r}"
    return _parse_acks(output.lines, kill_time, where)


async def _recover(
    data_dir: Path, where: str, jetstream: str | None
) -> tuple[list[int], dict[str, bytes], dict[str, tuple[int, bytes]]]:
    """Open the store as a fresh process would; return container epochs, the bytes of the
    untruncated segments and, for the trimmed ones, their start offset and bytes from there."""
    segments: dict[str, bytes] = {}
    trimmed: dict[str, tuple[int, bytes]] = {}
    options = store_options(jetstream)
    async with SegmentStore.open(data_dir, containers=CONTAINERS, **options) as store:
        for container in store.containers:
            assert container.status.value == "running", (
                f"{where}: container {container.id} is {container.status.value}"
                f" after recovery: {container.failure}"
            )
        epochs = [container.epoch for container in store.containers]
        for name in await store.list_segments("crash/trimmed"):
            info = await store.get_info(name)
            data = bytearray()
            while info.start_offset + len(data) < info.length:
                offset = info.start_offset + len(data)
                data += await store.read(name, offset, info.length - offset, wait_ms=0)
            trimmed[name] = (info.start_offset, bytes(data))
        for name in await store.list_segments("crash/segment"):
            info = await store.get_info(name)
            assert info.start_offset == 0, f"{where}: {name} lost its head: {info}"
            data = bytearray()
            while len(data) < info.length:
                chunk = await store.read(name, len(data), info.length - len(data), wait_ms=0)
                assert len(chunk) > 0, f"{where}: {name}: empty read at {len(data)} of {info}"
                data += chunk
            segments[name] = bytes(data)
    return epochs, segments, trimmed


# A segment's records by offset: (writer, seq, size).
Records = dict[int, tuple[str, int, int]]


def _parse_segment(
    name: str, data: bytes, known: tuple[bytes, Records] | None, where: str
) -> Records:
    """Every record of a segment by offset; fails unless the bytes are whole records only.

    ``known`` is what an earlier round recovered and checked. Those bytes must come back
    unchanged (a recovered byte is durable, and lengths never shrink); comparing them saves
    decoding them again, which keeps the test linear in the data written.
    """
    records: Records = {}
    offset = 0
    if known is not None:
        known_data, known_records = known
        if data[: len(known_data)] != known_data:
            differs = next(
                (i for i, (x, y) in enumerate(zip(data, known_data, strict=False)) if x != y),
                len(data),  # no differing byte: the segment got shorter
            )
            pytest.fail(
                f"{where}: {name} changed below its earlier recovered length {len(known_data)}:"
                f" now {len(data)} bytes long, first difference at offset {differs}"
            )
        records.update(known_records)
        offset = len(known_data)
    while offset < len(data):
        try:
            writer, seq, size = decode_record(data, offset)
        except RecordError as error:
            previous = max(records, default=None)
            pytest.fail(
                f"{where}: {name} (length {len(data)}) has no valid record at offset {offset}"
                f" (previous record at {previous}: {records.get(previous)}): {error}"
            )
        records[offset] = (writer, seq, size)
        offset += size
    return records


def _verify(
    all_acks: list[Ack],
    segments: dict[str, bytes],
    known: dict[str, tuple[bytes, Records]],
    where: str,
) -> int:
    """Checks 1 to 3 of the module docstring; returns how many unacknowledged records
    survived (in all rounds so far). ``known`` carries checked segments from round to round."""
    for name in known.keys() - segments.keys():
        pytest.fail(f"{where}: segment {name} disappeared")
    parsed = {
        name: _parse_segment(name, data, known.get(name), where) for name, data in segments.items()
    }
    known.update((name, (segments[name], parsed[name])) for name in segments)

    # 1. Every acknowledged append, byte for byte, at its acknowledged offset.
    acked: dict[str, set[int]] = defaultdict(set)
    for ack in all_acks:
        assert ack.segment in parsed, f"{where}: segment of {ack} is gone"
        found = parsed[ack.segment].get(ack.offset)
        # The parse checked the record's bytes against what (writer, seq) produce, so a match
        # of identity and size here is a byte-for-byte match of the acknowledged append.
        assert found == (ack.writer, ack.seq, ack.length_after - ack.offset), (
            f"{where}: {ack} not found at its offset; there is {found} (segment length"
            f" {len(segments[ack.segment])})"
        )
        assert ack.seq not in acked[ack.writer], f"{where}: {ack.writer} acked seq twice: {ack}"
        acked[ack.writer].add(ack.seq)

    # 3. Writer order. Acks of one writer are its sequence numbers 0..n-1 (it has one append in
    # flight at a time), so at most its next number may be present without an ack.
    present: dict[str, list[tuple[str, int, int]]] = defaultdict(list)
    for name, records in parsed.items():
        for offset, (writer, seq, _) in sorted(records.items()):
            present[writer].append((name, offset, seq))
    unacked_present = 0
    for writer, places in present.items():
        seqs = [seq for _, _, seq in places]
        assert len(seqs) == len(set(seqs)), f"{where}: {writer} has a record twice: {places}"
        done = acked.get(writer, set())
        assert done == set(range(len(done))), f"{where}: {writer}'s acks have gaps: {done}"
        extra = set(seqs) - done
        assert extra <= {len(done)}, (
            f"{where}: {writer} has unacknowledged records {sorted(extra)} beyond the one in"
            f" flight ({len(done)})"
        )
        unacked_present += len(extra)
        by_segment: dict[str, list[int]] = defaultdict(list)
        for name, _, seq in places:  # offset order within each segment
            by_segment[name].append(seq)
        for name, in_offset_order in by_segment.items():
            assert in_offset_order == sorted(in_offset_order), (
                f"{where}: {writer}'s records in {name} are out of order: {in_offset_order}"
            )
    return unacked_present


def _verify_trimmed(trims: list[Ack], trimmed: dict[str, tuple[int, bytes]], where: str) -> None:
    """Check 5 of the module docstring."""
    assert sorted(trimmed) == sorted(trimmed_names()), f"{where}: trimmed {sorted(trimmed)}"
    last: dict[str, Ack] = {}
    for ack in trims:  # in acknowledgement order: the last one per segment wins
        last[ack.segment] = ack
    for name, (start, data) in trimmed.items():
        offset, records = start, []
        while offset - start < len(data):
            try:
                writer, seq, size = decode_record(data, offset - start)
            except RecordError as error:
                pytest.fail(f"{where}: {name} has no valid record at {offset}: {error}")
            records.append((offset, writer, seq, size))
            offset += size
        ack = last.get(name)
        if ack is None:
            continue
        assert start >= ack.offset, f"{where}: {name} starts at {start}, before {ack}"
        if start == ack.offset:
            assert records and records[0] == (
                ack.offset,
                ack.writer,
                ack.seq,
                ack.length_after - ack.offset,
            ), f"{where}: {name}: last acknowledged {ack} is not at its offset: {records[:1]}"
        same_writer = [seq for _, writer, seq, _ in records if writer == ack.writer]
        assert same_writer == sorted(same_writer), f"{where}: {name} out of order: {records}"


async def _stream_first_sequence(jetstream: str, container: int) -> int:
    servers, _, prefix = jetstream.rpartition("/")
    client = await nats.connect(servers.split(","))
    try:
        info = await client.jetstream().stream_info(f"{prefix}-container-{container}")
        return info.state.first_seq
    finally:
        await client.close()


def _tier1_truncated_below(data_dir: Path, container: int) -> int:
    meta = data_dir / "tier1" / f"container-{container:04d}" / "META"
    return int(json.loads(meta.read_text())["truncated_below"])


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.parametrize("tier1", ["local", "jetstream"])
def test_acknowledged_appends_survive_sigkill(
    tier1: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    jetstream = None
    if tier1 == "jetstream":
        cluster = request.getfixturevalue("jetstream_cluster")
        jetstream = f"{','.join(cluster.servers)}/crash{os.getpid()}"
    seed = int(os.environ.get("CRASH_TEST_SEED", random.SystemRandom().randrange(2**32)))
    print(f"CRASH_TEST_SEED={seed}")
    rng = random.Random(seed)
    data_dir = tmp_path / "data"
    all_acks: list[Ack] = []
    rounds: list[_Round] = []
    previous_epochs: list[int] | None = None
    unacked_so_far = 0
    known: dict[str, tuple[bytes, Records]] = {}
    for round_no in range(ROUNDS):
        where = f"[seed={seed} round={round_no}]"
        result = _run_writer_round(data_dir, round_no, seed, rng, jetstream)
        all_acks.extend(result.acks)
        epochs, segments, trimmed = asyncio.run(_recover(data_dir, where, jetstream))
        assert len(segments) == SEGMENTS, f"{where}: segments {sorted(segments)}"
        unacked = _verify(all_acks, segments, known, where)
        _verify_trimmed([t for r in [*rounds, result] for t in r.trims], trimmed, where)
        result.unacked_present, unacked_so_far = unacked - unacked_so_far, unacked
        # 4. Each open (the writer's, then ours) takes every container to a new epoch.
        if previous_epochs is not None:
            assert all(new > old for new, old in zip(epochs, previous_epochs, strict=True)), (
                f"{where}: epochs {epochs} did not all grow from {previous_epochs}"
            )
        previous_epochs = epochs
        rounds.append(result)
        print(
            f"round {round_no}: {len(result.acks)} acks, {len(result.trims)} truncations,"
            f" {result.acks_before_kill} in the"
            f" {IN_FLIGHT_WINDOW_S} s before the kill,"
            f" {result.unacked_present} unacknowledged records present, epochs {epochs}"
        )

    summary = [(len(r.acks), r.acks_before_kill, r.unacked_present) for r in rounds]
    assert sum(len(r.trims) for r in rounds) > 100, f"[seed={seed}] too few truncations"
    # The trimmed container's Tier 1 really was truncated under the kills, not only rolled.
    truncated_below = (
        _tier1_truncated_below(data_dir, TRIMMED_CONTAINER)
        if jetstream is None
        else asyncio.run(_stream_first_sequence(jetstream, TRIMMED_CONTAINER)) - 1
    )
    print(f"container {TRIMMED_CONTAINER}: Tier 1 truncated below address {truncated_below}")
    assert truncated_below > 0
    assert len(all_acks) > MIN_TOTAL_ACKS, f"[seed={seed}] too few acks to mean much: {summary}"
    assert any(r.acks_before_kill > 0 and r.unacked_present > 0 for r in rounds), (
        f"[seed={seed}] no kill landed while appends were flowing: {summary}"
    )
