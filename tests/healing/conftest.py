"""Small file systems to run out of (a tmpfs each), skipped with the reason where this machine
or user cannot mount one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from segmentstore.drill.small_disk import SmallDisk, SmallDiskUnavailable


def _small_disk(path: Path, size_bytes: int) -> Iterator[SmallDisk]:
    disk = SmallDisk(path, size_bytes)
    try:
        disk.mount()
    except SmallDiskUnavailable as reason:
        pytest.skip(str(reason))
    try:
        yield disk
    finally:
        disk.unmount()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[SmallDisk]:
    """A 48 MiB tmpfs at ``tmp_path / "small"``."""
    yield from _small_disk(tmp_path / "small", 48 << 20)
