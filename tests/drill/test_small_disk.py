"""The drill's small disk: a read-only remount waits out a file held open for writing, a file
read through lazyfs above it does not keep it busy, and a copy keeps what it holds."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from lazy_mounts import mount_or_skip

from segmentstore.drill.small_disk import SmallDisk, SmallDiskUnavailable


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[SmallDisk]:
    """A 1 MiB disk at ``tmp_path/disk``, unmounted on the way out."""
    small = SmallDisk(tmp_path / "disk", 1 << 20)
    try:
        small.mount()
    except SmallDiskUnavailable as reason:
        pytest.skip(str(reason))
    try:
        yield small
    finally:
        small.unmount()


def test_a_read_only_remount_waits_for_a_write_under_way(disk: SmallDisk) -> None:
    # As the Storage Writer holds a chunk open while it writes: the kernel calls the mount
    # busy until the file is closed.
    fd = os.open(disk.path / "chunk", os.O_WRONLY | os.O_CREAT, 0o644)
    closer = threading.Timer(0.3, os.close, (fd,))
    closer.start()
    disk.set_read_only(True)
    closer.join()
    with pytest.raises(OSError):
        os.open(disk.path / "another", os.O_WRONLY | os.O_CREAT, 0o644)
    disk.set_read_only(False)
    os.close(os.open(disk.path / "another", os.O_WRONLY | os.O_CREAT, 0o644))


def test_a_copy_keeps_what_the_disk_holds_but_its_ballast(disk: SmallDisk, tmp_path: Path) -> None:
    kept = tmp_path / "disk.kept"
    (disk.path / "tier1").mkdir()
    (disk.path / "tier1" / "00000.log").write_bytes(b"records")
    disk.fill()
    disk.copy_to(kept)
    disk.unmount()
    assert (kept / "tier1" / "00000.log").read_bytes() == b"records"
    assert sorted(p.name for p in kept.iterdir()) == ["tier1"]  # no ballast: it is not evidence


def test_a_file_read_through_lazyfs_does_not_keep_the_disk_busy(
    disk: SmallDisk, tmp_path: Path
) -> None:
    """The drill's Tier 2 outage over lazyfs: a node that keeps reading manifests (hundreds of
    thousands of segments) must not keep the read-only remount from ever happening."""
    mount = mount_or_skip(tmp_path)  # lazyfs at tmp_path/mnt over tmp_path/disk
    try:
        (mount.mountpoint / "manifest").write_bytes(b"kept")
        with open(mount.mountpoint / "manifest", "rb") as reader:
            disk.set_read_only(True)
            assert reader.read() == b"kept"
            with pytest.raises(OSError):
                (mount.mountpoint / "chunk").write_bytes(b"refused")
        disk.set_read_only(False)
        (mount.mountpoint / "chunk").write_bytes(b"written")
    finally:
        mount.unmount()
