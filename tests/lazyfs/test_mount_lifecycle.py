"""Every lazyfs mount goes away, however its users end: unmounted, its server killed, its
parent killed, or a file still open on it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from lazy_mounts import mount_or_skip

from segmentstore.drill.lazyfs.kernel import detach_orphans, mounted_here

pytestmark = pytest.mark.integration


def _gone(mountpoint: Path, timeout_s: float = 15) -> bool:
    deadline = time.monotonic() + timeout_s
    while mounted_here(mountpoint):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_a_killed_server_leaves_a_dead_mount_that_unmount_detaches(tmp_path: Path) -> None:
    mount = mount_or_skip(tmp_path)
    try:
        (mount.mountpoint / "f").write_bytes(b"x")
        assert mount.pid is not None
        os.kill(mount.pid, signal.SIGKILL)
        time.sleep(0.2)
        assert mounted_here(mount.mountpoint)
        with pytest.raises(OSError):
            os.listdir(mount.mountpoint)  # nobody answers it any more
    finally:
        mount.unmount()
    assert not mounted_here(mount.mountpoint)
    assert os.listdir(mount.mountpoint) == []  # the plain directory under it again
    assert (mount.backing / "f").read_bytes() == b"x"


def test_the_next_mount_detaches_the_mounts_of_dead_servers(tmp_path: Path) -> None:
    orphan = mount_or_skip(tmp_path / "orphan")
    assert orphan.pid is not None
    os.kill(orphan.pid, signal.SIGKILL)
    time.sleep(0.2)
    assert mounted_here(orphan.mountpoint)
    assert str(orphan.mountpoint) in detach_orphans()
    assert not mounted_here(orphan.mountpoint)
    orphan.unmount()  # nothing left to do, and no error


_PARENT = """
import sys, time
from pathlib import Path
from segmentstore.drill.lazyfs import LazyMount
mount = LazyMount(Path(sys.argv[1]) / "disk", Path(sys.argv[1]) / "mnt")
mount.mount()
print("mounted", flush=True)
time.sleep(600)
"""


def test_a_server_whose_parent_died_unmounts_and_exits(tmp_path: Path) -> None:
    mount_or_skip(tmp_path / "probe").unmount()  # skips here where FUSE cannot mount
    parent = subprocess.Popen(
        [sys.executable, "-c", _PARENT, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert parent.stdout is not None and parent.stdout.readline() == "mounted\n"
        assert mounted_here(tmp_path / "mnt")
    finally:
        parent.kill()
        parent.wait()
        if parent.stdout is not None:
            parent.stdout.close()
    assert _gone(tmp_path / "mnt")


def test_unmounting_while_a_file_is_open_detaches_it_anyway(tmp_path: Path) -> None:
    mount = mount_or_skip(tmp_path)
    held = open(mount.mountpoint / "held", "wb")  # noqa: SIM115 (held open across unmount)
    try:
        mount.unmount()
        assert not mounted_here(mount.mountpoint)
        with pytest.raises(OSError):
            held.write(b"x")
            held.flush()
    finally:
        with contextlib.suppress(OSError):
            held.close()
