"""SIGKILL at each step of an eviction and of a load loses nothing: every acknowledged append
is there at its offset, every segment keeps its attributes, and a retry of an acknowledged
exactly-once append is still a duplicate (the writer sequences survived too)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from segmentstore import SegmentStore

from .eviction_victim import ATTRIBUTES, OPTIONS, SEGMENTS, STEPS, WRITER

ROOT = Path(__file__).resolve().parents[2]


def run_victim(data_dir: Path, step: str) -> list[tuple[str, int, int, bytes]]:
    victim = subprocess.run(
        [sys.executable, "-m", "tests.integration.eviction_victim", str(data_dir), step],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = victim.stdout.splitlines()
    assert victim.returncode == -signal.SIGKILL, victim.stderr[-3000:]
    # (Several worker threads may reach the step before the signal lands.)
    assert "READY" in lines and f"KILLED {step}" in lines, (lines[-3:], victim.stderr[-3000:])
    acks = []
    for line in lines:
        if line.startswith("ACK "):
            _, name, offset, seq, data = line.split()
            acks.append((name, int(offset), int(seq), bytes.fromhex(data)))
    return acks


@pytest.mark.slow
@pytest.mark.parametrize("step", STEPS)
async def test_a_kill_at_each_step_of_an_eviction_loses_nothing(tmp_path: Path, step: str) -> None:
    acks = run_victim(tmp_path, step)
    if step in ("loaded", "load_logged"):
        assert len(acks) >= len(SEGMENTS), "the segments were never appended to again"
    async with SegmentStore.open(tmp_path, containers=1, **OPTIONS) as store:
        for name, offset, _, data in acks:
            got = bytes(await store.read(name, offset, len(data)))
            assert got == data, (name, offset, got, data)
        for name in SEGMENTS:
            assert await store.get_attributes(name) == ATTRIBUTES
        for name, _, seq, data in acks:
            again = await store.append(name, data, writer_id=WRITER, writer_seq=seq)
            assert again.duplicate, (name, seq)
        assert await store.list_segments("evict/") == sorted(SEGMENTS)
        assert sum(c.segment_count for c in store.containers) == len(SEGMENTS)
    # A second kill, at the same step, over what the first left.
    more = run_victim(tmp_path, step)
    async with SegmentStore.open(tmp_path, containers=1, **OPTIONS) as store:
        for name, offset, _, data in acks + more:
            assert bytes(await store.read(name, offset, len(data))) == data
    assert os.listdir(tmp_path)
