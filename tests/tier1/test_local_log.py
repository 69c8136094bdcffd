"""What ``LocalDurableDataLog`` does beyond the contract: its files, torn tails, corruption,
locking and real write failures. Every test works on real files under ``tmp_path``."""

from __future__ import annotations

import asyncio
import errno
import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tier1 import (
    DataLogCorruptionError,
    DataLogError,
    DataLogLockedError,
    DataLogWriteError,
    LocalDurableDataLog,
    LogRecord,
)
from tier1.local.directory import LogDirectory, Meta
from tier1.local.record import HEADER, HEADER_SIZE, MAGIC

if TYPE_CHECKING:
    from conftest import LocalHarness

REPO = Path(__file__).resolve().parents[2]


def log_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.log"))


def headers(path: Path) -> list[tuple[int, int, int]]:
    """(position, address, payload length) of every record in a file (assumed intact)."""
    data = path.read_bytes()
    found, position = [], 0
    while position < len(data):
        magic, length, address, _ = HEADER.unpack_from(data, position)
        assert magic == MAGIC
        found.append((position, address, length))
        position += HEADER_SIZE + length
    return found


def flip_byte(path: Path, position: int) -> None:
    with path.open("r+b") as f:
        f.seek(position)
        byte = f.read(1)[0]
        f.seek(position)
        f.write(bytes([byte ^ 0x40]))


async def read_all(log: LocalDurableDataLog, from_address: int = 0) -> list[LogRecord]:
    return [record async for record in log.read(from_address)]


async def filled(directory: Path, payloads: list[bytes], **kwargs: int) -> list[int]:
    """Append ``payloads`` to a new log in ``directory``, close it, return the addresses."""
    log = LocalDurableDataLog(directory, **kwargs)
    await log.open()
    addresses = list(await asyncio.gather(*(log.append([p]) for p in payloads)))
    await log.close()
    return addresses


def payloads(count: int, size: int = 1000) -> list[bytes]:
    return [bytes([i % 251]) * size for i in range(count)]


def run_python(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )


# -- files and truncation ---------------------------------------------------------------------


async def test_files_are_named_by_base_address_and_rolled_at_segment_bytes(
    tmp_path: Path,
) -> None:
    segment = 10_000
    data = [*payloads(30, 1500), b"x" * 25_000, *payloads(10, 100)]
    addresses = await filled(tmp_path, data, segment_bytes=segment)

    files = log_files(tmp_path)
    assert len(files) > 3
    seen = []
    for i, path in enumerate(files):
        records = headers(path)
        base = records[0][1]
        assert path.name == f"{base:020d}.log"
        assert all(address == base + position for position, address, _ in records)
        seen += [address for _, address, _ in records]
        if i < len(files) - 1:
            size = path.stat().st_size
            last_record = HEADER_SIZE + records[-1][2]
            # Rolled at the first record boundary at or past segment_bytes.
            assert size >= segment > size - last_record
    assert seen == addresses
    # A record larger than segment_bytes still fits in one file.
    assert any(path.stat().st_size > 25_000 for path in files)


async def test_a_quiet_log_rolls_its_file_by_age_so_truncation_can_free_it(
    tmp_path: Path,
) -> None:
    log = LocalDurableDataLog(tmp_path, segment_bytes=1 << 20, segment_ms=200)
    await log.open()
    first = await log.append([b"a" * 100])
    await log.append([b"b" * 100])
    assert len(log_files(tmp_path)) == 1  # young and small: no roll
    await asyncio.sleep(0.3)
    later = await log.append([b"c" * 100])
    assert [int(path.stem) for path in log_files(tmp_path)] == [first, later]
    await log.truncate(later)
    assert [int(path.stem) for path in log_files(tmp_path)] == [later]
    assert [r.data for r in await read_all(log)] == [b"c" * 100]
    await log.close()


async def test_truncate_deletes_whole_files_only(tmp_path: Path) -> None:
    log = LocalDurableDataLog(tmp_path, segment_bytes=10_000)
    await log.open()
    data = payloads(100)
    addresses = list(await asyncio.gather(*(log.append([p]) for p in data)))
    bases = [int(path.stem) for path in log_files(tmp_path)]
    assert len(bases) >= 8

    target = addresses[55]
    holding = max(base for base in bases if base <= target)
    await log.truncate(target)
    assert [int(path.stem) for path in log_files(tmp_path)] == [b for b in bases if b >= holding]
    assert [r.address for r in await read_all(log)] == addresses[55:]
    assert log.size_bytes == sum(path.stat().st_size for path in log_files(tmp_path))

    end = addresses[-1] + HEADER_SIZE + len(data[-1])
    with pytest.raises(ValueError):
        await log.truncate(end + 1)
    await log.truncate(end)
    # The file being written is never deleted.
    assert [int(path.stem) for path in log_files(tmp_path)] == [bases[-1]]
    assert await read_all(log) == []
    await log.close()


async def test_open_finishes_a_truncation_interrupted_after_meta(tmp_path: Path) -> None:
    addresses = await filled(tmp_path, payloads(100), segment_bytes=10_000)
    bases = [int(path.stem) for path in log_files(tmp_path)]
    # As if the process died between writing META and deleting the files.
    directory = LogDirectory(str(tmp_path))
    directory.write_meta(Meta(epoch=directory.read_meta().epoch, truncated_below=addresses[55]))

    log = LocalDurableDataLog(tmp_path, segment_bytes=10_000)
    await log.open()
    holding = max(base for base in bases if base <= addresses[55])
    assert [int(path.stem) for path in log_files(tmp_path)] == [b for b in bases if b >= holding]
    assert [r.address for r in await read_all(log)] == addresses[55:]
    await log.close()


async def test_an_empty_directory_starts_at_truncated_below(tmp_path: Path) -> None:
    tmp_path.joinpath("log").mkdir()
    LogDirectory(str(tmp_path / "log")).write_meta(Meta(epoch=4, truncated_below=1000))
    log = LocalDurableDataLog(tmp_path / "log")
    assert await log.open() == 5
    assert [p.name for p in log_files(tmp_path / "log")] == [f"{1000:020d}.log"]
    assert await log.append([b"first"]) == 1000
    await log.close()


async def test_meta_is_replaced_atomically(tmp_path: Path) -> None:
    log = LocalDurableDataLog(tmp_path)
    for _ in range(2):
        await log.open()
        await log.close()
    assert json.loads((tmp_path / "META").read_text()) == {
        "format": 1,
        "epoch": 2,
        "truncated_below": 0,
    }
    await log.open()
    address = await log.append([b"x"])
    await log.truncate(address)
    await log.close()
    assert json.loads((tmp_path / "META").read_text())["truncated_below"] == address
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(".log")) == [
        "LOCK",
        "META",
    ]


async def test_size_bytes_tracks_the_files(tmp_path: Path) -> None:
    def on_disk() -> int:
        return sum(path.stat().st_size for path in log_files(tmp_path))

    log = LocalDurableDataLog(tmp_path, segment_bytes=50_000)
    await log.open()
    assert log.size_bytes == 0
    addresses = list(await asyncio.gather(*(log.append([p]) for p in payloads(200))))
    assert log.size_bytes == on_disk() == 200 * (HEADER_SIZE + 1000)
    await log.truncate(addresses[120])
    assert log.size_bytes == on_disk()
    await log.close()
    assert log.size_bytes == on_disk()
    await log.open()
    assert log.size_bytes == on_disk()
    await log.close()


# -- torn tails and corruption ----------------------------------------------------------------


@pytest.mark.parametrize("cut", ["inside the header", "after the header", "inside the payload"])
async def test_a_torn_last_record_is_dropped_and_appends_continue(tmp_path: Path, cut: str) -> None:
    data = payloads(20)
    addresses = await filled(tmp_path, data)
    (path,) = log_files(tmp_path)
    last = headers(path)[-1][0]
    offset = {"inside the header": 7, "after the header": HEADER_SIZE, "inside the payload": 300}
    os.truncate(path, last + offset[cut])

    log = LocalDurableDataLog(tmp_path)
    await log.open()
    expected = [LogRecord(a, p) for a, p in zip(addresses[:19], data[:19], strict=True)]
    assert await read_all(log) == expected
    assert path.stat().st_size == last
    assert await log.append([b"next"]) == addresses[19]
    await log.close()

    await log.open()
    assert await read_all(log) == [*expected, LogRecord(addresses[19], b"next")]
    await log.close()


def garbage_header(address: int, length: int, crc: int) -> bytes:
    return HEADER.pack(MAGIC, length, address, crc)


@pytest.mark.parametrize(
    "kind", ["random bytes", "zeros", "a header with a bad crc", "a header past the end"]
)
async def test_garbage_after_the_last_record_is_dropped(tmp_path: Path, kind: str) -> None:
    data = payloads(20)
    addresses = await filled(tmp_path, data)
    (path,) = log_files(tmp_path)
    end = path.stat().st_size
    garbage = {
        "random bytes": os.urandom(5000),
        "zeros": bytes(4096),
        "a header with a bad crc": garbage_header(end, 100, 12345) + os.urandom(100),
        "a header past the end": garbage_header(end, 1 << 20, 0) + os.urandom(100),
    }[kind]
    with path.open("ab") as f:
        f.write(garbage)

    log = LocalDurableDataLog(tmp_path)
    await log.open()
    assert path.stat().st_size == end
    expected = [LogRecord(a, p) for a, p in zip(addresses, data, strict=True)]
    assert await read_all(log) == expected
    assert await log.append([b"next"]) == end
    await log.close()


@pytest.mark.parametrize("where", ["magic", "address", "crc", "payload"])
async def test_corruption_inside_the_last_file_is_never_taken_for_a_torn_tail(
    tmp_path: Path, where: str
) -> None:
    addresses = await filled(tmp_path, payloads(20))
    (path,) = log_files(tmp_path)
    position = headers(path)[3][0]
    flip_byte(path, position + {"magic": 0, "address": 9, "crc": 17, "payload": 500}[where])
    size = path.stat().st_size

    for _ in range(2):  # the failed open released the lock
        log = LocalDurableDataLog(tmp_path)
        with pytest.raises(DataLogCorruptionError) as caught:
            await log.open()
        assert caught.value.address == addresses[3]
        assert caught.value.path == str(path)
    assert path.stat().st_size == size  # nothing was dropped


@pytest.mark.parametrize("record", ["an early record", "its last record"])
async def test_corruption_in_an_earlier_file_fails_read(tmp_path: Path, record: str) -> None:
    addresses = await filled(tmp_path, payloads(50), segment_bytes=10_000)
    first = log_files(tmp_path)[0]
    index = 2 if record == "an early record" else -1
    position, address, _ = headers(first)[index]
    flip_byte(first, position + HEADER_SIZE + 10)

    log = LocalDurableDataLog(tmp_path, segment_bytes=10_000)
    await log.open()  # only the last file is scanned on open
    with pytest.raises(DataLogCorruptionError) as caught:
        await read_all(log)
    assert caught.value.address == address
    assert caught.value.path == str(first)
    # Reading past the damaged file works, and so do appends.
    second = int(log_files(tmp_path)[1].stem)
    assert [r.address for r in await read_all(log, second)] == [a for a in addresses if a >= second]
    await log.append([b"still writable"])
    await log.close()


async def test_an_earlier_file_that_overlaps_the_next_fails_read(tmp_path: Path) -> None:
    await filled(tmp_path, payloads(50), segment_bytes=10_000)
    first, second = log_files(tmp_path)[:2]
    with first.open("ab") as f:
        f.write(b"extra")
    log = LocalDurableDataLog(tmp_path, segment_bytes=10_000)
    await log.open()
    with pytest.raises(DataLogCorruptionError) as caught:
        await read_all(log)
    assert caught.value.address == int(second.stem)
    await log.close()


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
    from tier1 import DataLogLockedError, LocalDurableDataLog

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
    from tier1 import LocalDurableDataLog

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
    from tier1 import DataLogWriteError, LocalDurableDataLog

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


async def test_a_real_write_failure_fails_the_rest_and_leaves_a_torn_tail(
    tmp_path: Path,
) -> None:
    # RLIMIT_FSIZE in a child process: a genuine EFBIG from the kernel, after a genuine partial
    # write, without limiting this test process.
    child = await asyncio.to_thread(run_python, FILL_UNTIL_EFBIG, str(tmp_path))
    assert child.returncode == 0, child.stderr
    report = json.loads(child.stdout)
    assert report["failures"] == [errno.EFBIG] * 5
    assert report["later"] == errno.EFBIG
    assert report["size_after"] == report["size_before"] + 500  # half a record got out

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


async def test_close_stops_both_threads(tmp_path: Path) -> None:
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
