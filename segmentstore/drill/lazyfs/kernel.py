"""Mounting and unmounting a FUSE file system with nothing installed: ``/dev/fuse`` opened
here, ``mount(2)`` called through ctypes (as root), or ``fusermount3`` when it is there and
``mount(2)`` is not allowed.

A mount's source names the PID of the server that answers it (``lazyfs-<pid>``), so that a
mount whose server died without unmounting (a SIGKILL) can be recognised and detached by the
next one (:func:`detach_orphans`).
"""

from __future__ import annotations

import array
import ctypes
import errno
import os
import re
import shutil
import socket
import subprocess
from pathlib import Path

FSTYPE = "fuse.lazyfs"
_SOURCE = re.compile(r"^lazyfs-(\d+)$")
_MS_NOSUID = 2
_MS_NODEV = 4
_MNT_DETACH = 2


class FuseUnavailable(RuntimeError):
    """FUSE cannot be mounted here; the message says why."""


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
    libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
    return libc


def source_name() -> str:
    return f"lazyfs-{os.getpid()}"


def mount(mountpoint: Path) -> int:
    """Mount a FUSE file system at ``mountpoint``; return the ``/dev/fuse`` descriptor that
    answers it."""
    try:
        fd = os.open("/dev/fuse", os.O_RDWR | os.O_CLOEXEC)
    except OSError as e:
        raise FuseUnavailable(f"cannot open /dev/fuse: {e.strerror}") from e
    options = f"fd={fd},rootmode=40000,user_id={os.getuid()},group_id={os.getgid()}"
    if os.getuid() == 0:
        options += ",allow_other,default_permissions"
        flags = _MS_NOSUID | _MS_NODEV
        done = _libc().mount(
            source_name().encode(), os.fsencode(mountpoint), FSTYPE.encode(), flags,
            options.encode(),
        )  # fmt: skip
        if done == 0:
            return fd
        failure = os.strerror(ctypes.get_errno())
    else:
        failure = "not root"
    os.close(fd)
    if shutil.which("fusermount3") is None:
        raise FuseUnavailable(f"mount(2) of FUSE failed ({failure}) and there is no fusermount3")
    return _fusermount(mountpoint)


def _fusermount(mountpoint: Path) -> int:
    """``fusermount3`` mounts and passes the ``/dev/fuse`` descriptor back over a socket."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with ours, theirs:
        done = subprocess.run(
            ["fusermount3", "-o", f"fsname={source_name()},subtype=lazyfs", "--", str(mountpoint)],
            env={"_FUSE_COMMFD": str(theirs.fileno()), "PATH": "/usr/bin:/bin"},
            pass_fds=(theirs.fileno(),),
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise FuseUnavailable(f"fusermount3 failed: {done.stderr.strip()}")
        fds = array.array("i")
        _, ancillary, _, _ = ours.recvmsg(1, socket.CMSG_LEN(fds.itemsize))
        for level, kind, data in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(data[: fds.itemsize])
        if not fds:
            raise FuseUnavailable("fusermount3 mounted but passed no descriptor back")
        return fds[0]


def detach(mountpoint: Path) -> None:
    """Lazily unmount (``umount -l``): gone from the namespace at once, finished once nothing
    uses it. Nothing happens if it is not mounted."""
    if _libc().umount2(os.fsencode(mountpoint), _MNT_DETACH) == 0:
        return
    error = ctypes.get_errno()
    if error in (errno.EINVAL, errno.ENOENT):
        return  # not a mount point (any more)
    if shutil.which("fusermount3") is not None:
        subprocess.run(["fusermount3", "-u", "-z", str(mountpoint)], capture_output=True)
        return
    subprocess.run(["umount", "-l", str(mountpoint)], capture_output=True)


def mounted_here(mountpoint: Path) -> bool:
    return any(point == str(mountpoint) for point, _ in _lazyfs_mounts())


def detach_orphans() -> list[str]:
    """Detach every lazyfs mount whose server process is gone; the mount points detached."""
    detached = []
    for point, pid in _lazyfs_mounts():
        if pid is not None and not _alive(pid):
            detach(Path(point))
            detached.append(point)
    return detached


def _lazyfs_mounts() -> list[tuple[str, int | None]]:
    found = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        fields = line.split()
        try:
            tail = fields[fields.index("-") + 1 :]
        except ValueError:
            continue
        if len(tail) < 2 or tail[0] != FSTYPE:
            continue
        point = fields[4].encode().decode("unicode_escape")  # \040 for a space, ...
        match = _SOURCE.match(tail[1])
        found.append((point, int(match.group(1)) if match else None))
    return found


def _alive(pid: int) -> bool:
    """Running (a zombie, killed but not yet waited for, answers nothing any more)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"
