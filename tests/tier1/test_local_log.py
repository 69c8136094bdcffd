"""What ``LocalDurableDataLog`` does beyond the contract: its files, rolling and truncation,
torn tails and corruption. Every test works on real files under ``tmp_path``."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from segmentstore.tier1 import (
    DataLogCorruptionError,
    LocalDurableDataLog,
    LogRecord,
)
from segmentstore.tier1.local.directory import LogDirectory, Meta
from segmentstore.tier1.local.record import HEADER, HEADER_SIZE, MAGIC

if TYPE_CHECKING:
    pass

from .local_log_helpers import (
    filled,
    flip_byte,
    headers,
    log_files,
    payloads,
    read_all,
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


@pytest.mark.parametrize("hole", ["a whole record", "a sector of a payload"])
async def test_a_power_loss_hole_before_a_whole_record_is_a_torn_tail(
    tmp_path: Path, hole: str
) -> None:
    """The page cache writes pages back in any order: after a power loss the un-synced end of
    the file can hold a later record whole and an earlier one not at all (zeros). Neither was
    acknowledged, so both go, and the log opens."""
    data = payloads(20, size=3000)
    addresses = await filled(tmp_path, data)
    (path,) = log_files(tmp_path)
    position, _, length = headers(path)[17]
    with path.open("r+b") as f:
        if hole == "a whole record":
            f.seek(position)
            f.write(bytes(HEADER_SIZE + length))
        else:
            sector = (position + HEADER_SIZE + 1024) // 512 * 512
            f.seek(sector)
            f.write(bytes(512))

    log = LocalDurableDataLog(tmp_path)
    await log.open()
    assert path.stat().st_size == position  # records 17, 18 and 19 were dropped
    expected = [LogRecord(a, p) for a, p in zip(addresses[:17], data[:17], strict=True)]
    assert await read_all(log) == expected
    assert await log.append([b"next"]) == addresses[17]
    await log.close()


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
