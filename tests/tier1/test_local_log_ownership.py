"""What ``LocalDurableDataLog`` does beyond the contract: locking (one owner per directory),
real write failures, and appends at the edges (iovec limits, reused parts, threads, shutdown).
Every test works on real files under ``tmp_path``."""

from __future__ import annotations

import asyncio
import errno
import json
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from segmentstore.tier1 import (
    DataLogError,
    DataLogLockedError,
    DataLogWriteError,
    LocalDurableDataLog,
    LogRecord,
)
from segmentstore.tier1.local import group_commit
from segmentstore.tier1.local.record import HEADER_SIZE
from segmentstore.tier1.log import Buffer

if TYPE_CHECKING:
    from conftest import LocalHarness

from .local_log_helpers import (
    REPO,
    log_files,
    payloads,
    read_all,
    run_python,
    use_thread_syncs,
)

# -- ownership --------------------------------------------------------------------------------


async def test_a_second_open_in_the_same_process_is_refused(tmp_path: Path) -> None:
    first = LocalDurableDataLog(tmp_path)
    await first.open()
    second = LocalDurableDataLog(tmp_path)
    with pytest.raises(DataLogLockedError) as caught:
        await second.open()
    assert caught.value.path == str(tmp_path)
    with pytest.raises(DataLogError):
        await first.open()  # already open
    await first.close()
    await second.open()
    await second.close()


TRY_OPEN = """
    import asyncio, sys
    from segmentstore.tier1 import DataLogLockedError, LocalDurableDataLog

    async def main():
        log = LocalDurableDataLog(sys.argv[1])
        try:
            await log.open()
        except DataLogLockedError:
            sys.exit(3)
        await log.close()

    asyncio.run(main())
"""


async def test_another_process_cannot_open_a_held_log(tmp_path: Path) -> None:
    log = LocalDurableDataLog(tmp_path)
    await log.open()
    refused = await asyncio.to_thread(run_python, TRY_OPEN, str(tmp_path))
    assert refused.returncode == 3, refused.stderr
    await log.close()
    allowed = await asyncio.to_thread(run_python, TRY_OPEN, str(tmp_path))
    assert allowed.returncode == 0, allowed.stderr


HOLD_OPEN = """
    import asyncio, sys
    from segmentstore.tier1 import LocalDurableDataLog

    async def main():
        log = LocalDurableDataLog(sys.argv[1])
        await log.open()
        print("open", flush=True)
        await asyncio.sleep(60)

    asyncio.run(main())
"""


async def test_the_lock_dies_with_its_process(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(HOLD_OPEN), str(tmp_path)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert await asyncio.to_thread(holder.stdout.readline) == "open\n"
        with pytest.raises(DataLogLockedError):
            await LocalDurableDataLog(tmp_path).open()
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
    log = LocalDurableDataLog(tmp_path)
    await log.open()
    await log.close()


# -- write failures ---------------------------------------------------------------------------

FILL_UNTIL_EFBIG = """
    import asyncio, json, os, resource, signal, sys
    from segmentstore.tier1 import DataLogWriteError, LocalDurableDataLog

    async def main(directory):
        log = LocalDurableDataLog(directory)
        await log.open()
        acknowledged = [await log.append([bytes([i]) * 1000]) for i in range(10)]
        (name,) = [n for n in os.listdir(directory) if n.endswith(".log")]
        size = os.path.getsize(os.path.join(directory, name))
        # Files may not grow past half a record more: the next writev is partial, the one
        # after it fails with EFBIG (SIGXFSZ ignored, or it would kill the process).
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.setrlimit(resource.RLIMIT_FSIZE, (size + 500, hard))
        results = await asyncio.gather(
            *(log.append([bytes([100 + i]) * 1000]) for i in range(5)), return_exceptions=True
        )
        later = log.append([b"later"])
        try:
            await later
        except DataLogWriteError as e:
            later = e
        await log.close()
        print(json.dumps({
            "acknowledged": acknowledged,
            "failures": [getattr(r, "errno", repr(r)) for r in results],
            "later": getattr(later, "errno", repr(later)),
            "size_before": size,
            "size_after": os.path.getsize(os.path.join(directory, name)),
        }))

    asyncio.run(main(sys.argv[1]))
"""


async def test_a_real_write_failure_fails_the_rest_and_gives_back_its_torn_bytes(
    tmp_path: Path,
) -> None:
    # RLIMIT_FSIZE in a child process: a genuine EFBIG from the kernel, after a genuine partial
    # write, without limiting this test process.
    child = await asyncio.to_thread(run_python, FILL_UNTIL_EFBIG, str(tmp_path))
    assert child.returncode == 0, child.stderr
    report = json.loads(child.stdout)
    assert report["failures"] == [errno.EFBIG] * 5
    assert report["later"] == errno.EFBIG
    # Half a record got out, and was cut off again: on a full disk those bytes are what the
    # truncation behind Tier 2 needs to write its META.
    assert report["size_after"] == report["size_before"]

    log = LocalDurableDataLog(tmp_path)
    await log.open()
    records = await read_all(log)
    assert [r.address for r in records] == report["acknowledged"]
    assert [r.data for r in records] == [bytes([i]) * 1000 for i in range(10)]
    assert log.size_bytes == report["size_before"]  # the torn half record was dropped
    await log.append([b"working again"])
    await log.close()


async def test_a_write_failure_is_reported_with_its_errno(local_harness: LocalHarness) -> None:
    harness = local_harness
    log = harness.new_log()
    await log.open()
    await log.append([b"before"])
    with harness.failing_writes():
        failed = log.append([b"x" * 100])
        with pytest.raises(DataLogWriteError) as caught:
            await failed
    assert caught.value.errno == errno.EFBIG
    await log.close()


# -- appends ----------------------------------------------------------------------------------


async def test_records_and_batches_beyond_iov_max(tmp_path: Path) -> None:
    log = LocalDurableDataLog(tmp_path)
    await log.open()
    parts = [bytes([i % 256]) * 3 for i in range(3000)]  # one record, 3000 buffers
    many = payloads(3000, 10)  # one batch, 6000 buffers
    futures = [log.append(parts), *(log.append([p]) for p in many)]
    addresses = await asyncio.gather(*futures)
    records = await read_all(log)
    assert records[0] == LogRecord(addresses[0], b"".join(parts))
    assert [r.data for r in records[1:]] == many
    await log.close()


async def test_loop_written_and_thread_written_records_keep_their_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Small records are written by the event loop while the writer thread is parked; large
    # ones and rolls go to the thread, and whatever is queued behind them waits its turn.
    writers: set[str] = set()
    real_writev_all = group_commit.writev_all

    def watched_writev_all(fd: int, buffers: list[Buffer], nbytes: int) -> None:
        writers.add(threading.current_thread().name)
        real_writev_all(fd, buffers, nbytes)

    monkeypatch.setattr(group_commit, "writev_all", watched_writev_all)
    log = LocalDurableDataLog(tmp_path, segment_bytes=2 * 1024 * 1024)
    await log.open()
    large = group_commit.INLINE_MAX_BYTES + 1
    data = [bytes([i % 256]) * (large if i % 7 == 3 else 100 + i) for i in range(120)]
    addresses: list[int] = []
    for start in range(0, len(data), 10):  # bursts, awaited: the writer parks in between
        addresses += await asyncio.gather(*(log.append([d]) for d in data[start : start + 10]))
    assert addresses == sorted(addresses)
    assert writers == {threading.main_thread().name, "tier1-writer"}
    assert len(log_files(tmp_path)) > 1  # rolls happened too
    await log.close()

    reopened = LocalDurableDataLog(tmp_path)
    await reopened.open()
    records = await read_all(reopened)
    assert [(r.address, r.data) for r in records] == list(zip(addresses, data, strict=True))
    await reopened.close()


async def test_the_parts_sequence_may_be_reused_at_once(tmp_path: Path) -> None:
    log = LocalDurableDataLog(tmp_path)
    await log.open()
    parts: list[bytes] = []
    futures = []
    for i in range(100):
        parts.extend([b"head", bytes([i]) * 100])
        futures.append(log.append(parts))
        parts.clear()  # only the buffers must stay untouched until durable
    await asyncio.gather(*futures)
    assert [r.data for r in await read_all(log)] == [b"head" + bytes([i]) * 100 for i in range(100)]
    await log.close()


async def test_non_byte_memoryviews_count_their_bytes(tmp_path: Path) -> None:
    log = LocalDurableDataLog(tmp_path)
    await log.open()
    words = memoryview(bytearray(range(16))).cast("I")  # 4 items, 16 bytes
    first = await log.append([words])
    second = await log.append([b"next"])
    assert second - first == HEADER_SIZE + 16
    assert (await read_all(log))[0].data == bytes(range(16))
    await log.close()


async def test_append_off_the_event_loop_thread_is_refused(tmp_path: Path) -> None:
    log = LocalDurableDataLog(tmp_path)
    await log.open()
    with pytest.raises(RuntimeError):
        await asyncio.to_thread(log.append, [b"from a worker thread"])
    await log.close()


def tier1_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("tier1-")]


async def test_close_stops_the_writer_thread(tmp_path: Path) -> None:
    # Syncs go through an io_uring here: no thread of ours runs them.
    log = LocalDurableDataLog(tmp_path)
    await log.open()
    await log.append([b"x"])
    assert tier1_threads() == ["tier1-writer"]
    await log.close()
    assert tier1_threads() == []


async def test_close_stops_the_sync_thread_where_syncs_need_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_thread_syncs(monkeypatch)
    log = LocalDurableDataLog(tmp_path)
    await log.open()
    await log.append([b"x"])
    assert sorted(tier1_threads()) == ["tier1-syncer", "tier1-writer"]
    await log.close()
    assert tier1_threads() == []


async def test_a_cancelled_open_gives_the_lock_back(tmp_path: Path) -> None:
    opening = asyncio.create_task(LocalDurableDataLog(tmp_path).open())
    await asyncio.sleep(0)
    opening.cancel()
    with pytest.raises(asyncio.CancelledError):
        await opening
    log = LocalDurableDataLog(tmp_path)
    for _ in range(500):
        try:
            await log.open()
            break
        except DataLogLockedError:
            await asyncio.sleep(0.01)
    else:
        pytest.fail("the lock was never released")
    await log.close()


async def test_a_loop_shutting_down_mid_close_still_stops_the_writer(tmp_path: Path) -> None:
    async def abandon() -> list[asyncio.Future[int]]:
        log = LocalDurableDataLog(tmp_path)
        await log.open()
        futures = [log.append([p]) for p in payloads(2000)]
        closing = asyncio.get_running_loop().create_task(log.close())
        await asyncio.sleep(0)  # the close starts draining...
        assert not closing.done()
        return futures  # ...and asyncio.run cancels it on the way out

    await asyncio.to_thread(asyncio.run, abandon())
    assert tier1_threads() == []
    log = LocalDurableDataLog(tmp_path)
    await log.open()  # the lock was released, after the writer stopped
    records = await read_all(log)
    assert [r.data for r in records] == payloads(2000)[: len(records)]
    await log.close()
