"""A small file system to run out of: a size-limited tmpfs mounted for a drill or a test.

Filling it with a ballast file makes writes on it fail with ``ENOSPC`` the way a full volume
does; dropping the ballast gives the room back. Mounting needs privileges (root, or a user
namespace): where ``mount`` fails, :meth:`SmallDisk.mount` raises :class:`SmallDiskUnavailable`
with the reason, and callers skip the out-of-space faults.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
import time
from pathlib import Path

_BALLAST = ".ballast"
_REMOUNT_ATTEMPTS = 100  # 5 s


class SmallDiskUnavailable(RuntimeError):
    """This platform or user cannot mount a size-limited file system here."""


class SmallDisk:
    def __init__(self, path: Path, size_bytes: int) -> None:
        self.path = path
        self.size_bytes = size_bytes
        self._mounted = False

    def mount(self) -> None:
        if shutil.which("mount") is None:
            raise SmallDiskUnavailable("there is no mount command")
        self.path.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={self.size_bytes}", "tmpfs", str(self.path)],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            reason = done.stderr.strip() or f"exit {done.returncode}"
            raise SmallDiskUnavailable(f"cannot mount a tmpfs at {self.path}: {reason}")
        self._mounted = True

    def unmount(self) -> None:
        if self._mounted:
            # Lazily: a killed server's last file handles may still be closing.
            subprocess.run(["umount", "-l", str(self.path)], capture_output=True, check=False)
            self._mounted = False

    def set_read_only(self, read_only: bool) -> None:
        """Remount read-only (every write fails with ``EROFS``) or writable again."""
        mode = "ro" if read_only else "rw"
        # The kernel refuses a read-only remount while a file is open for writing ("busy"):
        # the store's Storage Writer holds one only for the moment of a chunk write.
        for _ in range(_REMOUNT_ATTEMPTS):
            done = subprocess.run(
                ["mount", "-o", f"remount,{mode}", str(self.path)], capture_output=True, text=True
            )
            if done.returncode == 0:
                return
            if "busy" not in done.stderr:
                break
            time.sleep(0.05)
        raise SmallDiskUnavailable(f"cannot remount {self.path} {mode}: {done.stderr.strip()}")

    def __enter__(self) -> SmallDisk:
        self.mount()
        return self

    def __exit__(self, *exc: object) -> None:
        self.unmount()

    @property
    def free_bytes(self) -> int:
        stats = os.statvfs(self.path)
        return stats.f_bavail * stats.f_frsize

    def fill(self, leave_bytes: int = 0) -> None:
        """Write ballast until at most ``leave_bytes`` are free (or the disk refuses more)."""
        block = b"\0" * (1 << 20)
        fd = os.open(self.path / _BALLAST, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            while (free := self.free_bytes) > leave_bytes:
                try:
                    os.write(fd, block[: min(len(block), free - leave_bytes)])
                except OSError as e:
                    if e.errno != errno.ENOSPC:
                        raise
                    break
        finally:
            os.close(fd)

    def make_room(self) -> None:
        """Drop the ballast."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path / _BALLAST)

    def copy_to(self, destination: Path) -> None:
        """Copy what the disk holds (but its ballast) to ``destination``, on a real disk: a
        failed drill keeps it for a person to read."""
        shutil.copytree(
            self.path, destination, symlinks=True, ignore=shutil.ignore_patterns(_BALLAST),
            dirs_exist_ok=True,
        )  # fmt: skip
