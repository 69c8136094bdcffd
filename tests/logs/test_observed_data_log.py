"""The observed Tier 1 log reports each record's write+sync time and hides nothing of the log
it wraps: a log that can stall still says when it is unavailable."""

from __future__ import annotations

from pathlib import Path

from segmentstore.logs.observed_data_log import (
    ObservedDataLog,
    ObservedStallingDataLog,
    observed,
)
from segmentstore.observations import Observations, StoreObserver
from segmentstore.tier1 import DurableDataLog, LocalDurableDataLog


class Recorder(StoreObserver):
    def __init__(self) -> None:
        self.tier1: list[float] = []

    def tier1_written(self, seconds: float) -> None:
        self.tier1.append(seconds)


class Stalling(LocalDurableDataLog):
    stalled = False

    @property
    def available(self) -> bool:
        return not self.stalled


async def test_each_durable_record_is_timed(tmp_path: Path) -> None:
    observations, recorder = Observations(), Recorder()
    observations.add(recorder)
    log = observed(LocalDurableDataLog(tmp_path), observations)
    await log.open()
    try:
        addresses = [await log.append([b"record", bytes([i])]) for i in range(3)]
        assert addresses == sorted(addresses)
        assert len(recorder.tier1) == 3 and all(s > 0 for s in recorder.tier1)
        records = [r.data async for r in log.read()]
        assert records[-3:] == [b"record\x00", b"record\x01", b"record\x02"]
    finally:
        await log.close()


def test_a_log_that_can_stall_stays_one(tmp_path: Path) -> None:
    plain = observed(LocalDurableDataLog(tmp_path / "a"), Observations())
    assert type(plain) is ObservedDataLog
    # The Durable Log asks only logs whose class overrides ``available``.
    assert type(plain).available is DurableDataLog.available
    inner = Stalling(tmp_path / "b")
    stalling = observed(inner, Observations())
    assert isinstance(stalling, ObservedStallingDataLog)
    assert stalling.available
    inner.stalled = True
    assert not stalling.available
