"""lazyfs read-only (the drill's Tier 2 outage over lazyfs): every change fails with EROFS,
whatever is open, and reads go on; then the mount is writable again."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from lazy_mounts import mount_or_skip


def test_a_read_only_mount_refuses_every_change_and_serves_reads(tmp_path: Path) -> None:
    mount = mount_or_skip(tmp_path)
    root = mount.mountpoint
    try:
        (root / "manifest").write_bytes(b"kept")
        held = os.open(root / "chunk", os.O_WRONLY | os.O_CREAT, 0o644)  # open before
        try:
            mount.set_read_only(True)
            refused = [
                lambda: os.write(held, b"late"),
                lambda: os.open(root / "new", os.O_WRONLY | os.O_CREAT, 0o644),
                lambda: os.open(root / "manifest", os.O_WRONLY),
                lambda: os.rename(root / "manifest", root / "moved"),
                lambda: os.link(root / "manifest", root / "linked"),
                lambda: os.unlink(root / "manifest"),
                lambda: os.mkdir(root / "dir"),
                lambda: os.truncate(root / "manifest", 0),
            ]
            for change in refused:
                with pytest.raises(OSError) as error:
                    change()
                assert error.value.errno == errno.EROFS
            assert (root / "manifest").read_bytes() == b"kept"
            assert sorted(p.name for p in root.iterdir()) == ["chunk", "manifest"]
            os.fsync(held)  # as on a read-only remount: nothing is left to sync
            # ... because going read-only made everything durable, as a remount does.
            assert mount.status()["unsynced_names"] == 0
            mount.set_read_only(False)
            os.write(held, b"written")
            os.fsync(held)
        finally:
            os.close(held)
        assert (root / "chunk").read_bytes() == b"written"
        os.rename(root / "manifest", root / "moved")
    finally:
        mount.unmount()
