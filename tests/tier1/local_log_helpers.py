"""Shared by the local log tests: reading the files a log leaves, and filling one."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

from segmentstore.tier1 import (
    LocalDurableDataLog,
    LogRecord,
)
from segmentstore.tier1.local import group_commit
from segmentstore.tier1.local.record import HEADER, HEADER_SIZE, MAGIC
from segmentstore.tier1.local.sync_requests import ThreadSyncs

if TYPE_CHECKING:
    import pytest

REPO = Path(__file__).resolve().parents[2]


def use_thread_syncs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Local logs opened from now on sync through a thread, as where there is no io_uring."""
    monkeypatch.setattr(
        group_commit, "open_sync_requests", lambda loop, done: ThreadSyncs(loop, done)
    )


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
