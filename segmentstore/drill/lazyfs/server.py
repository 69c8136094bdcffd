"""The FUSE server: reads requests from ``/dev/fuse``, answers them from :class:`LazyFS`, and
takes commands from its parent on standard input, one JSON object a line, answering each on
standard output:

``{"op": "lose_power", "seed": N, "keep": "random"}``
    stop answering, detach the mount, bring the backing directory to what survives, mount it
    again fresh (the kernel's caches go with the old mount, as a reboot's would), and answer
    with the loss report. The parent first kills the processes that use the mount (a request
    under way when the mount goes fails, so a process blocked in a held ``fsync`` can die),
    and starts them again once they are gone.
``{"op": "hold_syncs"}``
    complete no ``fsync`` from now on (they wait, as on a disk that stalls): a power loss that
    follows finds them under way, with everything written meanwhile un-synced.
``{"op": "status"}``
    how much is un-synced now.
``{"op": "unmount"}`` or the end of standard input (the parent died)
    detach the mount and exit.

One thread does everything, so operations reach the model in one order.
"""

from __future__ import annotations

import errno
import heapq
import json
import os
import select
import signal
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from segmentstore.drill.lazyfs import abi, kernel
from segmentstore.drill.lazyfs.filesystem import LazyFS, Model
from segmentstore.drill.lazyfs.nodes import Node

MAX_WRITE = 1 << 20
_BUFFER = MAX_WRITE + 64 * 1024
_VALID_S = 1  # how long the kernel may cache names and attributes: it alone changes them


# The requests that change the file system, refused with EROFS while it is read-only (an
# outage of the storage under it), as a read-only mount refuses them; reads go on, and syncs
# succeed: as a read-only remount does, going read-only made everything durable first.
_CHANGES = frozenset({
    abi.SETATTR, abi.SYMLINK, abi.MKNOD, abi.MKDIR, abi.UNLINK, abi.RMDIR, abi.RENAME,
    abi.RENAME2, abi.LINK, abi.WRITE, abi.CREATE,
})  # fmt: skip


class Stop(Exception):
    pass


class _Deferred:
    """A handler's answer that comes later (an ``fsync`` that takes the disk's time)."""


DEFERRED = _Deferred()
Reply = bytes | list[bytes] | None | _Deferred


class Server:
    def __init__(self, backing: Path, mountpoint: Path, model: Model, fsync_ms: float) -> None:
        self.backing = str(backing)
        self.mountpoint = mountpoint
        self.model = model
        self.fs = LazyFS(self.backing, model)
        self.fuse_fd = -1
        self._control = b""
        # An fsync takes this long, as on a disk, while other requests go on: a power loss
        # can come while one is under way (its data is then not durable yet).
        self._fsync_s = fsync_ms / 1000
        self._unique = 0
        self._holding = False
        self._read_only = False
        self._due: list[tuple[float, int, Callable[[], None]]] = []  # (when, unique, finish)
        self._handlers: dict[int, Callable[[int, memoryview], Reply]] = {
            abi.INIT: self._init, abi.LOOKUP: self._lookup, abi.GETATTR: self._getattr,
            abi.SETATTR: self._setattr, abi.READLINK: self._readlink, abi.SYMLINK: self._symlink,
            abi.MKNOD: self._mknod, abi.MKDIR: self._mkdir, abi.UNLINK: self._unlink,
            abi.RMDIR: self._rmdir, abi.RENAME: self._rename, abi.RENAME2: self._rename2,
            abi.LINK: self._link, abi.OPEN: self._open, abi.READ: self._read,
            abi.WRITE: self._write, abi.STATFS: self._statfs, abi.RELEASE: self._release,
            abi.FSYNC: self._fsync, abi.FLUSH: self._nothing, abi.OPENDIR: self._opendir,
            abi.READDIR: self._readdir, abi.RELEASEDIR: self._release,
            abi.FSYNCDIR: self._fsyncdir, abi.CREATE: self._create, abi.DESTROY: self._destroy,
            abi.FORGET: self._nothing, abi.BATCH_FORGET: self._nothing,
            abi.INTERRUPT: self._nothing,
        }  # fmt: skip

    # -- the loop ----------------------------------------------------------------------------

    def run(self) -> None:
        os.umask(0)
        self.fuse_fd = kernel.mount(self.mountpoint)
        self._say({"mounted": str(self.mountpoint), "pid": os.getpid()})
        try:
            while True:
                due = self._due and not self._holding
                wait = max(0.0, self._due[0][0] - time.monotonic()) if due else None
                ready = select.select([self.fuse_fd, sys.stdin.fileno()], [], [], wait)[0]
                if sys.stdin.fileno() in ready:
                    self._command()
                if self.fuse_fd in ready:
                    self._request()
                self._finish_due()
        except Stop:
            pass
        finally:
            self._detach()

    def _finish_due(self) -> None:
        now = time.monotonic()
        while self._due and self._due[0][0] <= now and not self._holding:
            _, unique, finish = heapq.heappop(self._due)
            try:
                finish()
            except OSError as e:
                self._reply(unique, -(e.errno or errno.EIO))
            else:
                self._reply(unique, 0)

    def _later(self, finish: Callable[[], None]) -> Reply:
        if self._fsync_s <= 0 and not self._holding:
            finish()
            return None
        heapq.heappush(self._due, (time.monotonic() + self._fsync_s, self._unique, finish))
        return DEFERRED

    def _detach(self) -> None:
        self._due.clear()  # their processes are gone: those syncs never completed
        self._holding = False
        kernel.detach(self.mountpoint)
        if self.fuse_fd >= 0:
            os.close(self.fuse_fd)
            self.fuse_fd = -1
        self.fs.close_all()

    def _request(self) -> None:
        try:
            raw = os.read(self.fuse_fd, _BUFFER)
        except OSError as e:
            if e.errno in (errno.EINTR, errno.EAGAIN, errno.ENOENT):
                return  # interrupted, or a request the kernel took back
            if e.errno == errno.ENODEV:
                raise Stop from None  # unmounted from outside
            raise
        view = memoryview(raw)
        _, opcode, unique, nodeid, *_ = abi.IN_HEADER.unpack_from(view)
        handler = self._handlers.get(opcode)
        body = view[abi.IN_HEADER.size :]
        self._unique = unique
        if handler is None:
            self._reply(unique, -errno.ENOSYS)
            return
        if self._read_only and opcode in _CHANGES:
            self._reply(unique, -errno.EROFS)
            return
        try:
            payload = handler(nodeid, body)
        except OSError as e:
            self._reply(unique, -(e.errno or errno.EIO))
            return
        except Stop:
            self._reply(unique, 0)
            raise
        except Exception:
            traceback.print_exc()
            self._reply(unique, -errno.EIO)
            return
        if opcode in abi.NO_REPLY or isinstance(payload, _Deferred):
            return
        self._reply(unique, 0, payload)

    def _reply(self, unique: int, error: int, payload: bytes | list[bytes] | None = None) -> None:
        parts = [] if payload is None else [payload] if isinstance(payload, bytes) else payload
        length = abi.OUT_HEADER.size + sum(len(p) for p in parts)
        try:
            os.writev(self.fuse_fd, [abi.OUT_HEADER.pack(length, error, unique), *parts])
        except OSError as e:
            if e.errno != errno.ENOENT:  # the request was interrupted meanwhile
                raise

    # -- commands from the parent ------------------------------------------------------------

    def _command(self) -> None:
        chunk = os.read(sys.stdin.fileno(), 65536)
        if not chunk:
            raise Stop
        self._control += chunk
        while b"\n" in self._control:
            line, self._control = self._control.split(b"\n", 1)
            command = json.loads(line)
            op = command.get("op")
            if op == "unmount":
                self._say({"unmounted": True})
                raise Stop
            if op == "status":
                unsynced = [u.unsynced for u in self.fs.files.values() if u.unsynced]
                self._say(
                    {
                        "files_with_unsynced_data": len(unsynced),
                        "unsynced_writes": sum(unsynced),
                        "unsynced_names": len(self.fs.names.pending),
                    }
                )
            elif op == "read_only":
                self._read_only = bool(command["on"])
                if self._read_only:
                    self.fs.sync_everything()
                self._say({"read_only": self._read_only})
            elif op == "hold_syncs":
                self._holding = True
                self._say({"holding": len(self._due)})
            elif op == "lose_power":
                self._say(self._lose_power(int(command["seed"]), command.get("keep", "random")))
            else:
                self._say({"error": f"unknown command {op!r}"})

    def _lose_power(self, seed: int, keep: Any) -> dict[str, Any]:
        started = time.monotonic()
        self._detach()
        report = self.fs.lose_power(seed, keep)
        self.fs = LazyFS(self.backing, self.model)
        self.fuse_fd = kernel.mount(self.mountpoint)
        report["took_s"] = round(time.monotonic() - started, 3)
        return report

    @staticmethod
    def _say(message: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()

    # -- replies -----------------------------------------------------------------------------

    @staticmethod
    def _attr(node: Node, st: os.stat_result, nlink: int) -> bytes:
        return abi.ATTR.pack(
            st.st_ino, st.st_size, st.st_blocks,
            int(st.st_atime), int(st.st_mtime), int(st.st_ctime),
            st.st_atime_ns % 1_000_000_000, st.st_mtime_ns % 1_000_000_000,
            st.st_ctime_ns % 1_000_000_000,
            st.st_mode, nlink, st.st_uid, st.st_gid, st.st_rdev, 4096, 0,
        )  # fmt: skip

    def _entry(self, node: Node, st: os.stat_result) -> bytes:
        head = abi.ENTRY_OUT.pack(node.nid, 0, _VALID_S, _VALID_S, 0, 0)
        return head + self._attr(node, st, self.fs.nodes.nlink(node, st))

    def _attr_out(self, node: Node, st: os.stat_result) -> bytes:
        head = abi.ATTR_OUT.pack(_VALID_S, 0, 0)
        return head + self._attr(node, st, self.fs.nodes.nlink(node, st))

    # -- requests ----------------------------------------------------------------------------

    def _init(self, nodeid: int, body: memoryview) -> bytes:
        _, _, readahead, flags = abi.INIT_IN.unpack_from(body)
        wanted = (abi.ASYNC_READ | abi.BIG_WRITES | abi.MAX_PAGES) & flags
        return abi.INIT_OUT.pack(
            abi.KERNEL_MAJOR, abi.KERNEL_MINOR, readahead, wanted, 16, 12, MAX_WRITE, 1,
            MAX_WRITE // 4096, 0, 0,
        )  # fmt: skip

    def _lookup(self, nodeid: int, body: memoryview) -> bytes:
        node, st = self.fs.lookup(nodeid, _name(body))
        return self._entry(node, st)

    def _getattr(self, nodeid: int, body: memoryview) -> bytes:
        flags, _, fh = abi.GETATTR_IN.unpack_from(body)
        node, st = self.fs.getattr(nodeid, fh if flags & abi.GETATTR_FH else None)
        return self._attr_out(node, st)

    def _setattr(self, nodeid: int, body: memoryview) -> bytes:
        (valid, _, fh, size, _, atime, mtime, _, atimensec, mtimensec, _, mode, _, uid, gid,
         _) = abi.SETATTR_IN.unpack_from(body)  # fmt: skip
        changes: dict[str, Any] = {}
        if valid & abi.FATTR_MODE:
            changes["mode"] = mode
        if valid & abi.FATTR_UID:
            changes["uid"] = uid
        if valid & abi.FATTR_GID:
            changes["gid"] = gid
        if valid & (abi.FATTR_ATIME | abi.FATTR_MTIME):
            node, st = self.fs.getattr(nodeid)
            now = time.time_ns()
            a = now if valid & abi.FATTR_ATIME_NOW else atime * 1_000_000_000 + atimensec
            m = now if valid & abi.FATTR_MTIME_NOW else mtime * 1_000_000_000 + mtimensec
            changes["times_ns"] = (
                a if valid & abi.FATTR_ATIME else st.st_atime_ns,
                m if valid & abi.FATTR_MTIME else st.st_mtime_ns,
            )
        if changes:
            self.fs.chmod_chown_utime(nodeid, changes)
        if valid & abi.FATTR_SIZE:
            self.fs.truncate(nodeid, size)
        node, st = self.fs.getattr(nodeid, fh if valid & abi.FATTR_FH else None)
        return self._attr_out(node, st)

    def _readlink(self, nodeid: int, body: memoryview) -> bytes:
        return self.fs.readlink(nodeid)

    def _symlink(self, nodeid: int, body: memoryview) -> bytes:
        name, target = _names(body)
        return self._entry(*self.fs.symlink(nodeid, name, target))

    def _mknod(self, nodeid: int, body: memoryview) -> bytes:
        mode, rdev, _, _ = abi.MKNOD_IN.unpack_from(body)
        name = _name(body[abi.MKNOD_IN.size :])
        return self._entry(*self.fs.mknod(nodeid, name, mode, rdev))

    def _mkdir(self, nodeid: int, body: memoryview) -> bytes:
        mode, _ = abi.MKDIR_IN.unpack_from(body)
        return self._entry(*self.fs.mkdir(nodeid, _name(body[abi.MKDIR_IN.size :]), mode))

    def _unlink(self, nodeid: int, body: memoryview) -> None:
        self.fs.unlink(nodeid, _name(body), directory=False)

    def _rmdir(self, nodeid: int, body: memoryview) -> None:
        self.fs.unlink(nodeid, _name(body), directory=True)

    def _rename(self, nodeid: int, body: memoryview) -> None:
        (new_dir,) = abi.RENAME_IN.unpack_from(body)
        old, new = _names(body[abi.RENAME_IN.size :])
        self.fs.rename(nodeid, old, new_dir, new, 0)

    def _rename2(self, nodeid: int, body: memoryview) -> None:
        new_dir, flags, _ = abi.RENAME2_IN.unpack_from(body)
        if flags & ~abi.RENAME_NOREPLACE:
            raise OSError(errno.EINVAL, "only RENAME_NOREPLACE is supported")
        old, new = _names(body[abi.RENAME2_IN.size :])
        self.fs.rename(nodeid, old, new_dir, new, flags)

    def _link(self, nodeid: int, body: memoryview) -> bytes:
        (old,) = abi.LINK_IN.unpack_from(body)
        return self._entry(*self.fs.link(old, nodeid, _name(body[abi.LINK_IN.size :])))

    def _open(self, nodeid: int, body: memoryview) -> bytes:
        flags, _ = abi.OPEN_IN.unpack_from(body)
        if self._read_only and flags & os.O_ACCMODE != os.O_RDONLY:
            raise OSError(errno.EROFS, "read-only file system")
        return abi.OPEN_OUT.pack(self.fs.open(nodeid, flags), 0, 0)

    def _create(self, nodeid: int, body: memoryview) -> list[bytes]:
        _, mode, _, _ = abi.CREATE_IN.unpack_from(body)
        node, st, fh = self.fs.create(nodeid, _name(body[abi.CREATE_IN.size :]), mode)
        return [self._entry(node, st), abi.OPEN_OUT.pack(fh, 0, 0)]

    def _read(self, nodeid: int, body: memoryview) -> bytes:
        fh, offset, size, *_ = abi.READ_IN.unpack_from(body)
        return self.fs.read(fh, offset, size)

    def _write(self, nodeid: int, body: memoryview) -> bytes:
        fh, offset, size, *_ = abi.WRITE_IN.unpack_from(body)
        data = body[abi.WRITE_IN.size : abi.WRITE_IN.size + size]
        return abi.WRITE_OUT.pack(self.fs.write(fh, offset, data), 0)

    def _statfs(self, nodeid: int, body: memoryview) -> bytes:
        s = self.fs.statfs()
        return abi.KSTATFS.pack(
            s.f_blocks, s.f_bfree, s.f_bavail, s.f_files, s.f_ffree, s.f_bsize, s.f_namemax,
            s.f_frsize, 0,
        )  # fmt: skip

    def _release(self, nodeid: int, body: memoryview) -> None:
        fh, *_ = abi.RELEASE_IN.unpack_from(body)
        self.fs.release(fh)

    def _fsync(self, nodeid: int, body: memoryview) -> Reply:
        point = self.fs.sync_began(nodeid)
        return self._later(lambda: self.fs.fsync(point))

    def _fsyncdir(self, nodeid: int, body: memoryview) -> Reply:
        point = self.fs.sync_began(nodeid)
        return self._later(lambda: self.fs.fsyncdir(point))

    def _opendir(self, nodeid: int, body: memoryview) -> bytes:
        return abi.OPEN_OUT.pack(self.fs.opendir(nodeid), 0, 0)

    def _readdir(self, nodeid: int, body: memoryview) -> bytes:
        fh, offset, size, *_ = abi.READ_IN.unpack_from(body)
        return self.fs.readdir(fh, offset, size)

    def _destroy(self, nodeid: int, body: memoryview) -> None:
        raise Stop

    def _nothing(self, nodeid: int, body: memoryview) -> None:
        return None


def _name(body: memoryview) -> str:
    raw = bytes(body)
    return os.fsdecode(raw[: raw.index(b"\0")] if b"\0" in raw else raw)


def _names(body: memoryview) -> tuple[str, str]:
    first, second, *_ = bytes(body).split(b"\0")
    return os.fsdecode(first), os.fsdecode(second)


def main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m segmentstore.drill.lazyfs")
    parser.add_argument("backing", type=Path)
    parser.add_argument("mountpoint", type=Path)
    parser.add_argument("--model", choices=["strict", "journaled"], default="strict")
    parser.add_argument("--fsync-ms", type=float, default=2.0, help="how long an fsync takes")
    args = parser.parse_args(argv)
    server = Server(args.backing.resolve(), args.mountpoint.resolve(), args.model, args.fsync_ms)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # finally: detach the mount
    try:
        server.run()
    except kernel.FuseUnavailable as e:
        Server._say({"error": str(e)})
        return 3
    return 0
