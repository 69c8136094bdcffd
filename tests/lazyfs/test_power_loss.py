"""lazyfs mounted for real: what survives a simulated power loss, file by file and name by
name, in the strict (POSIX) model and in the journaled one."""

from __future__ import annotations

import errno
import hashlib
import os
import threading
from pathlib import Path

import pytest
from lazy_mounts import mount_or_skip

from segmentstore.data_dir import sync_directory
from segmentstore.drill.lazyfs import LazyMount

pytestmark = pytest.mark.integration


def _write(path: Path, data: bytes, *, sync: bool, mode: str = "wb") -> None:
    with open(path, mode) as f:
        f.write(data)
        f.flush()
        if sync:
            os.fsync(f.fileno())


def test_unsynced_writes_are_lost_and_synced_ones_survive(lazy: LazyMount) -> None:
    root = lazy.mountpoint
    _write(root / "log", b"synced", sync=True)
    sync_directory(root)
    _write(root / "log", b" and not", sync=False, mode="ab")
    assert (root / "log").read_bytes() == b"synced and not"
    report = lazy.lose_power(seed=1, keep="none")
    assert (root / "log").read_bytes() == b"synced"
    assert report["unsynced_writes"] == 1 and report["writes_kept"] == 0
    assert report["files_cut"] == ["log: kept 0 of 1"]
    # The mount works as before afterwards, and keeping everything loses nothing.
    _write(root / "log", b" again", sync=False, mode="ab")
    lazy.lose_power(seed=1, keep="all")
    assert (root / "log").read_bytes() == b"synced again"


def test_an_overwrite_and_a_truncation_come_undone(lazy: LazyMount) -> None:
    root = lazy.mountpoint
    _write(root / "f", b"0123456789", sync=True)
    sync_directory(root)
    with open(root / "f", "r+b") as f:
        f.seek(3)
        f.write(b"abc")
        f.flush()
        f.truncate(5)
    assert (root / "f").read_bytes() == b"012ab"
    lazy.lose_power(seed=1, keep="none")
    assert (root / "f").read_bytes() == b"0123456789"


def test_a_new_file_needs_an_fsync_of_its_directory(lazy: LazyMount) -> None:
    root = lazy.mountpoint
    (root / "d").mkdir()
    sync_directory(root)
    _write(root / "d" / "only-file-synced", b"data", sync=True)
    _write(root / "d" / "dir-synced-too", b"data", sync=True)
    sync_directory(root / "d")
    _write(root / "d" / "late", b"data", sync=True)
    lazy.lose_power(seed=1, keep="none")
    assert sorted(os.listdir(root / "d")) == ["dir-synced-too", "only-file-synced"]
    assert (root / "d" / "only-file-synced").read_bytes() == b"data"


def test_in_the_journaled_model_a_file_fsync_makes_its_name_durable(journaled: LazyMount) -> None:
    root = journaled.mountpoint
    _write(root / "unsynced", b"data", sync=False)
    _write(root / "named", b"data", sync=True)
    journaled.lose_power(seed=1, keep="none")
    # Both names were made durable by the journal commit of the fsync; the data of the
    # second file was not.
    assert (root / "named").read_bytes() == b"data"
    assert (root / "unsynced").read_bytes() == b""


def test_a_created_directory_needs_its_parent_synced(lazy: LazyMount) -> None:
    root = lazy.mountpoint
    (root / "a" / "b").mkdir(parents=True)
    _write(root / "a" / "b" / "f", b"data", sync=True)
    sync_directory(root / "a" / "b")
    sync_directory(root / "a")  # a/b is durable in a, but a itself is not in the root
    lazy.lose_power(seed=1, keep="none")
    assert os.listdir(root) == []


def test_a_replace_by_rename_without_a_directory_fsync_is_undone(lazy: LazyMount) -> None:
    root = lazy.mountpoint
    _write(root / "manifest", b"version 1", sync=True)
    sync_directory(root)
    _write(root / "manifest.tmp", b"version 2", sync=True)
    os.replace(root / "manifest.tmp", root / "manifest")
    assert (root / "manifest").read_bytes() == b"version 2"
    lazy.lose_power(seed=1, keep="none")
    assert os.listdir(root) == ["manifest"]
    assert (root / "manifest").read_bytes() == b"version 1"
    # With the directory synced the new version is the one that stays.
    _write(root / "manifest.tmp", b"version 3", sync=True)
    os.replace(root / "manifest.tmp", root / "manifest")
    sync_directory(root)
    lazy.lose_power(seed=1, keep="none")
    assert (root / "manifest").read_bytes() == b"version 3"


def test_removals_and_links_without_a_directory_fsync_come_back(lazy: LazyMount) -> None:
    root = lazy.mountpoint
    _write(root / "gone", b"still here", sync=True)
    (root / "empty").mkdir()
    sync_directory(root)
    (root / "gone").unlink()
    (root / "empty").rmdir()
    _write(root / "tmp", b"linked", sync=True)
    os.link(root / "tmp", root / "key")
    (root / "tmp").unlink()
    with open(root / "gone-but-open", "wb") as kept_open:  # unlinked while open
        os.unlink(root / "gone-but-open")
        kept_open.write(b"x")
    assert sorted(os.listdir(root)) == ["key"]
    lazy.lose_power(seed=1, keep="none")
    assert sorted(os.listdir(root)) == ["empty", "gone"]
    assert (root / "gone").read_bytes() == b"still here"


def test_a_power_loss_with_a_seed_replays(tmp_path: Path) -> None:
    """The same operations and the same seed leave the same files; other seeds, others."""
    outcomes = []
    for run, seed in enumerate([7, 7, 8, 9, 10, 11]):
        mount = mount_or_skip(tmp_path / f"run{run}")
        try:
            root = mount.mountpoint
            for i in range(6):
                _write(root / f"f{i}", b"base", sync=True)
            sync_directory(root)
            for i in range(6):
                for j in range(5):
                    _write(root / f"f{i}", f"+{j}".encode(), sync=False, mode="ab")
                os.rename(root / f"f{i}", root / f"g{i}")
            mount.lose_power(seed=seed)
            outcomes.append(_tree(root))
        finally:
            mount.unmount()
    assert outcomes[0] == outcomes[1]
    assert len(set(outcomes)) > 2


def _tree(root: Path) -> tuple[tuple[str, str], ...]:
    return tuple(
        (name, hashlib.sha256((root / name).read_bytes()).hexdigest())
        for name in sorted(os.listdir(root))
    )


def test_an_fsync_under_way_when_the_power_goes_does_not_count(tmp_path: Path) -> None:
    mount = mount_or_skip(tmp_path, fsync_ms=5)
    try:
        root = mount.mountpoint
        _write(root / "f", b"durable", sync=True)
        sync_directory(root)
        mount.hold_syncs()
        failed: list[int | None] = []
        fd = os.open(root / "f", os.O_WRONLY | os.O_APPEND)

        def sync_forever() -> None:
            os.write(fd, b" never acknowledged")
            try:
                os.fsync(fd)
            except OSError as e:
                failed.append(e.errno)

        syncer = threading.Thread(target=sync_forever)
        syncer.start()
        syncer.join(0.5)
        assert syncer.is_alive()  # held: the fsync does not return
        mount.lose_power(seed=1, keep="none")
        syncer.join(10)
        assert failed in ([errno.ECONNABORTED], [errno.ENOTCONN])  # its mount went away
        with pytest.raises(OSError):
            os.close(fd)  # the descriptor is released, its last flush fails the same way
        assert (root / "f").read_bytes() == b"durable"
    finally:
        mount.unmount()
