"""The local log on lazyfs, through a simulated power loss: whatever a loss keeps of the
writes no ``fdatasync`` covered, the log opens again and holds every acknowledged record.

The seeds below are losses that kept a later write of an un-synced batch and dropped an
earlier one (lazyfs's report says ``kept 3 of 4``): the log used to refuse to open then,
taking the hole for corruption in the middle of the log.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from lazy_mounts import mount_or_skip

from segmentstore.tier1 import LocalDurableDataLog
from segmentstore.tier1.local.record import encode_header

from .local_log_helpers import read_all

pytestmark = pytest.mark.integration

# Acknowledges one record, says so, and once told appends two large ones (one batch, one
# writev, which the kernel splits into 1 MiB writes) whose fdatasync never ends: the disk holds
# its syncs, and the power goes first.
_WRITER = """
import asyncio, sys
from segmentstore.tier1 import LocalDurableDataLog
from segmentstore.tier1.local.record import encode_header

async def main():
    log = LocalDurableDataLog(sys.argv[1])
    await log.open()
    await log.append([b"A" * 100])
    print("acked", flush=True)
    sys.stdin.readline()
    pending = [log.append([b"B" * 1_500_000]), log.append([b"C" * 1_500_000])]
    await asyncio.sleep(600)

asyncio.run(main())
"""


@pytest.mark.parametrize("seed", [17, 24])
def test_a_power_loss_that_kept_a_later_write_leaves_a_log_that_opens(
    tmp_path: Path, seed: int
) -> None:
    for attempt in range(3):  # the two records usually go in one batch; else try again
        report = _lose_power_under_a_batch(tmp_path / f"attempt-{attempt}", seed)
        if report is not None:
            break
    else:
        pytest.fail("the two records never went to the disk in one batch")
    assert report["files_cut"] == ["wal/00000000000000000000.log: kept 3 of 4"]


def _lose_power_under_a_batch(root: Path, seed: int) -> dict[str, Any] | None:
    """Writes the records, loses power with ``seed``, and checks the log that is left; the
    loss report, or None if the batch did not go as one writev (four 1 MiB writes)."""
    mount = mount_or_skip(root)
    try:
        wal = mount.mountpoint / "wal"
        writer = subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(wal)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        report = None
        try:
            assert writer.stdin is not None and writer.stdout is not None
            assert writer.stdout.readline() == "acked\n"
            mount.hold_syncs()
            writer.stdin.write("go\n")
            writer.stdin.flush()
            deadline = time.monotonic() + 5
            while mount.status()["unsynced_writes"] < 4 and time.monotonic() < deadline:
                time.sleep(0.02)  # until both records are written (their sync is held)
            if mount.status()["unsynced_writes"] != 4:
                return None
            writer.kill()
            report = mount.lose_power(seed)
        finally:
            writer.kill()
            if report is None:
                # A killed process cannot die while the mount holds its sync: end the mount.
                mount.unmount()
            writer.wait()
            for pipe in (writer.stdin, writer.stdout):
                if pipe is not None:
                    pipe.close()
        asyncio.run(_check(wal))
        return report
    finally:
        mount.unmount()


async def _check(wal: Path) -> None:
    log = LocalDurableDataLog(wal)
    await log.open()
    records = await read_all(log)
    await log.close()
    assert records[0].data == b"A" * 100  # the acknowledged record
    # What follows, if anything, is whole records of what was written, in order.
    assert [r.data[:1] for r in records[1:]] == [b"B", b"C"][: len(records) - 1]


_ACK_ONE = """
import asyncio, sys
from segmentstore.tier1 import LocalDurableDataLog
from segmentstore.tier1.local.record import encode_header

async def main():
    log = LocalDurableDataLog(sys.argv[1])
    await log.open()
    await log.append([b"acknowledged"])
    print("acked", flush=True)
    await asyncio.sleep(600)

asyncio.run(main())
"""


def test_a_log_directory_made_several_levels_deep_survives_a_power_loss(tmp_path: Path) -> None:
    """Opening a log makes its missing directories; each must be durable in its parent, or a
    loss that keeps no un-synced name (``keep="none"``) takes the log away."""
    mount = mount_or_skip(tmp_path)
    try:
        wal = mount.mountpoint / "a" / "b" / "wal"
        writer = subprocess.Popen(
            [sys.executable, "-c", _ACK_ONE, str(wal)], stdout=subprocess.PIPE, text=True
        )
        try:
            assert writer.stdout is not None and writer.stdout.readline() == "acked\n"
            writer.kill()
            mount.lose_power(1, "none")
        finally:
            writer.kill()
            writer.wait()
            if writer.stdout is not None:
                writer.stdout.close()

        async def reopened() -> list[bytes]:
            log = LocalDurableDataLog(wal)
            await log.open()
            records = await read_all(log)
            await log.close()
            return [r.data for r in records]

        assert asyncio.run(reopened()) == [b"acknowledged"]
    finally:
        mount.unmount()


def test_records_a_killed_writer_left_unsynced_are_synced_when_the_log_opens(
    tmp_path: Path,
) -> None:
    """Recovery replays every record it finds and the container builds on them (flushes them
    to Tier 2, truncates behind them): what it found must survive a power loss that comes
    after, even though the writer that wrote it was killed before its ``fdatasync``."""
    mount = mount_or_skip(tmp_path)
    try:
        wal = mount.mountpoint / "wal"

        async def first_owner() -> None:
            log = LocalDurableDataLog(str(wal))
            await log.open()
            await log.append([b"A" * 100])
            await log.close()

        asyncio.run(first_owner())
        # A record the killed owner wrote and never synced: in the file, not on the disk.
        (last,) = sorted(wal.glob("*.log"))
        address = int(last.stem) + last.stat().st_size
        payload = b"B" * 100
        with open(last, "ab") as f:
            f.write(encode_header(address, len(payload), [payload]) + payload)

        async def next_owner() -> list[bytes]:
            log = LocalDurableDataLog(str(wal))
            await log.open()
            try:
                return [bytes(r.data) for r in await read_all(log)]
            finally:
                await log.close()

        assert asyncio.run(next_owner()) == [b"A" * 100, payload]
        mount.lose_power(seed=1, keep="none")
        assert asyncio.run(next_owner()) == [b"A" * 100, payload]
    finally:
        mount.unmount()
