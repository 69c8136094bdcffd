"""When eviction writes a checkpoint: once the segments evicted since the last one are at least
as many as stay active. So the checkpoints eviction writes cost at most a row per evicted
segment, recovery replays at most about as many evicted segments as there are active ones, and
none once every segment is idle."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from types import SimpleNamespace

from segmentstore.containers.active_segments import ActiveSegments
from segmentstore.settings import MetadataSettings


class _Script:
    """A host that holds no segments, and eviction rounds scripted as (evicted, active
    before); each checkpoint is recorded as (segments evicted since the last one, the rows it
    holds: those still active)."""

    accepted = SimpleNamespace(retention_watch=[])  # running, with no retention due

    def __init__(self, rounds: list[tuple[int, int]]) -> None:
        self._rounds: Iterator[tuple[int, int]] = iter(rounds)
        self._since = self._after = 0
        self.written: list[tuple[int, int]] = []
        self.done = asyncio.Event()

    def evict_round(self) -> tuple[int, int]:
        try:
            evicted, active = next(self._rounds)
        except StopIteration:
            self.done.set()
            return 0, self._after  # nothing more leaves
        self._since += evicted
        self._after = active - evicted
        return evicted, active

    async def checkpoint(self) -> None:
        self.written.append((self._since, self._after))
        self._since = 0


async def _drain(rounds: list[tuple[int, int]]) -> list[tuple[int, int]]:
    script = _Script(rounds)
    settings = MetadataSettings(idle_eviction_ms=1)  # a round every 50 ms
    segments = ActiveSegments(0, settings, None, script)  # type: ignore[arg-type]
    segments.evict_round = script.evict_round  # type: ignore[method-assign]
    segments.start()
    await asyncio.wait_for(script.done.wait(), 30)
    await segments.stop()
    return script.written


async def test_draining_a_hundred_thousand_costs_at_most_a_row_per_evicted_segment() -> None:
    active, rounds = 100_000, []
    while active:
        rounds.append((5_000, active))
        active -= 5_000
    written = await _drain(rounds)
    assert written, "no checkpoint after every segment left"
    assert sum(rows for _, rows in written) <= 100_000
    assert all(since >= rows for since, rows in written)
    assert written[-1][1] == 0  # the last one holds none: recovery replays nothing evicted


async def test_a_few_evictions_among_many_active_write_no_checkpoint() -> None:
    assert await _drain([(10, 1_000), (20, 990)]) == []


async def test_the_last_idle_segment_leaving_writes_a_checkpoint() -> None:
    assert await _drain([(1, 1)]) == [(1, 0)]


async def test_a_stopped_container_forgets_what_was_evicted() -> None:
    script = _Script([(600, 1_000)])
    settings = MetadataSettings(idle_eviction_ms=1)
    segments = ActiveSegments(0, settings, None, script)  # type: ignore[arg-type]

    def stopping() -> tuple[int, int]:
        evicted = script.evict_round()
        script.accepted = None  # the container stopped: its next start writes a checkpoint
        return evicted

    segments.evict_round = stopping  # type: ignore[method-assign]
    segments.start()
    await asyncio.wait_for(script.done.wait(), 30)
    await segments.stop()
    assert script.written == [] and segments._evicted_since_checkpoint == 0
