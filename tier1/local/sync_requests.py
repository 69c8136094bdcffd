"""``fdatasync`` without blocking the event loop: the loop asks, and hears back on the loop.

A log has at most one sync under way at a time (:class:`GroupCommit` sees to that). Two ways
to run it:

- :class:`RingSyncs` (Linux 5.6 or later): the request goes into an io_uring; one of the
  ring's kernel workers runs the ``fdatasync`` and signals an ``eventfd`` that the loop
  watches. No Python thread takes part, so nothing contends for the GIL: with a thread per
  log, every sync cost the loop several futex calls and context switches as the thread took
  the GIL after its ``fdatasync`` and gave it back (about 8 futex calls per 1 KiB append over
  HTTP, measured).
- :class:`ThreadSyncs`: a thread of the log's own calls ``os.fdatasync`` and reports back
  with one ``call_soon_threadsafe``. Used where io_uring is not available (not Linux, an old
  kernel, a seccomp profile that forbids it, as container runtimes' defaults often do).

``done(errno)`` is called on the loop once per request, with 0 on success.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import logging
import mmap
import os
import struct
import sys
import threading
from collections.abc import Callable
from typing import Protocol

log = logging.getLogger(__name__)

SyncDone = Callable[[int], None]


class SyncRequests(Protocol):
    def submit(self, fd: int) -> None:
        """Start an ``fdatasync`` of ``fd`` (on the loop; none may be under way)."""

    def close(self) -> None:
        """Wait for a sync under way and release everything (blocking; any thread)."""


def open_sync_requests(loop: asyncio.AbstractEventLoop, done: SyncDone) -> SyncRequests:
    """An io_uring if this process may have one, else a thread (call on the loop)."""
    global _told_no_ring
    try:
        return RingSyncs(loop, done)
    except OSError as e:
        if not _told_no_ring:
            _told_no_ring = True
            log.info("io_uring is not available (%s): local logs sync through threads", e)
        return ThreadSyncs(loop, done)


_told_no_ring = False


# -- io_uring ----------------------------------------------------------------------------------

_IO_URING_SETUP, _IO_URING_ENTER, _IO_URING_REGISTER = 425, 426, 427  # every architecture
_IORING_OFF_SQES = 0x10000000
_IORING_OFF_CQ_RING = 0x8000000
_IORING_FEAT_SINGLE_MMAP = 1
# The kernel's follow-up work for a completion runs when the loop's thread next enters the
# kernel anyway (it does so all the time), instead of interrupting it to run at once.
_IORING_SETUP_COOP_TASKRUN = 1 << 8
_IORING_ENTER_GETEVENTS = 1
_IORING_REGISTER_EVENTFD = 4
_IORING_OP_NOP = 0
_IORING_OP_FSYNC = 3
_IORING_FSYNC_DATASYNC = 1
# Straight to the ring's workers: an fsync cannot complete without blocking anyway.
_IOSQE_ASYNC = 1 << 4

_U32 = struct.Struct("<I")
# struct io_uring_sqe as an fsync uses it: opcode, flags, ioprio, fd, off, addr, len,
# fsync_flags, user_data, then padding to 64 bytes.
_SQE = struct.Struct("<BBHiQQIIQ24x")
_CQE = struct.Struct("<QiI")  # user_data, res, flags


class _SqOffsets(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_uint32)
        for name in ("head", "tail", "ring_mask", "ring_entries", "flags", "dropped", "array")
    ] + [("resv1", ctypes.c_uint32), ("user_addr", ctypes.c_uint64)]


class _CqOffsets(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_uint32)
        for name in ("head", "tail", "ring_mask", "ring_entries", "overflow", "cqes", "flags")
    ] + [("resv1", ctypes.c_uint32), ("user_addr", ctypes.c_uint64)]


class _Params(ctypes.Structure):
    # struct io_uring_params of <linux/io_uring.h>.
    _fields_ = [
        ("sq_entries", ctypes.c_uint32),
        ("cq_entries", ctypes.c_uint32),
        ("flags", ctypes.c_uint32),
        ("sq_thread_cpu", ctypes.c_uint32),
        ("sq_thread_idle", ctypes.c_uint32),
        ("features", ctypes.c_uint32),
        ("wq_fd", ctypes.c_uint32),
        ("resv", ctypes.c_uint32 * 3),
        ("sq_off", _SqOffsets),
        ("cq_off", _CqOffsets),
    ]


def _libc_syscall() -> Callable[..., int]:
    syscall = ctypes.CDLL(None, use_errno=True).syscall
    syscall.restype = ctypes.c_long
    return syscall


class RingSyncs:
    """fdatasync through an io_uring of the log's own, completions through an eventfd.

    Not Linux's older asynchronous I/O (``io_submit``): that runs an fsync on a kernel worker
    bound to the submitting CPU, which waits behind a busy event loop for its time slice
    (about 4 ms per sync, measured, against 0.45 ms here). The ring's workers run on any CPU.

    Built with a probe, so that a kernel or a seccomp profile that refuses it fails here
    (``OSError``), not on an append.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, done: SyncDone) -> None:
        if sys.byteorder != "little" or not sys.platform.startswith("linux"):
            raise OSError(errno.ENOSYS, "io_uring is used on little-endian Linux only")
        self._syscall = _libc_syscall()
        self._loop = loop
        self._loop_thread = threading.get_ident()  # built on the loop
        self._done = done
        self._lock = threading.Lock()  # the completion ring: the loop reaps, close() drains
        self._in_flight = 0
        self._closed = False
        params = _Params(flags=_IORING_SETUP_COOP_TASKRUN)
        try:
            self._ring = self._call(_IO_URING_SETUP, 4, ctypes.byref(params))
        except OSError as e:
            if e.errno != errno.EINVAL:
                raise
            params = _Params()  # a kernel before 5.19
            self._ring = self._call(_IO_URING_SETUP, 4, ctypes.byref(params))
        self._maps: list[mmap.mmap] = []
        self._eventfd = -1
        try:
            self._map(params)
            self._eventfd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
            registered = ctypes.c_int(self._eventfd)
            self._call(
                _IO_URING_REGISTER,
                self._ring,
                _IORING_REGISTER_EVENTFD,
                ctypes.byref(registered),
                1,
            )
            self._probe()
        except BaseException:
            self._release()
            raise
        loop.add_reader(self._eventfd, self._on_signal)

    def _map(self, params: _Params) -> None:
        sq, cq = params.sq_off, params.cq_off
        sq_bytes = sq.array + params.sq_entries * 4
        cq_bytes = cq.cqes + params.cq_entries * _CQE.size
        flags, protection = mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE
        if params.features & _IORING_FEAT_SINGLE_MMAP:
            self._sq_ring = self._cq_ring = mmap.mmap(
                self._ring, max(sq_bytes, cq_bytes), flags, protection, offset=0
            )
            self._maps.append(self._sq_ring)
        else:
            self._sq_ring = mmap.mmap(self._ring, sq_bytes, flags, protection, offset=0)
            self._maps.append(self._sq_ring)
            self._cq_ring = mmap.mmap(
                self._ring, cq_bytes, flags, protection, offset=_IORING_OFF_CQ_RING
            )
            self._maps.append(self._cq_ring)
        self._sqes = mmap.mmap(
            self._ring, params.sq_entries * 64, flags, protection, offset=_IORING_OFF_SQES
        )
        self._maps.append(self._sqes)
        self._sq_tail, self._sq_array = sq.tail, sq.array
        self._sq_mask = _U32.unpack_from(self._sq_ring, sq.ring_mask)[0]
        self._cq_head, self._cq_tail, self._cqes = cq.head, cq.tail, cq.cqes
        self._cq_mask = _U32.unpack_from(self._cq_ring, cq.ring_mask)[0]

    def _call(self, number: int, *args: object) -> int:
        result = self._syscall(number, *args)
        if result < 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))
        return result

    def _probe(self) -> None:
        # A no-op, the way a sync goes (to a worker): it tells whether this kernel takes the
        # request's flags, and unlike a sync it cannot keep the loop waiting on a slow disk.
        self._push(_IORING_OP_NOP, -1, 0)
        self._call(_IO_URING_ENTER, self._ring, 0, 1, _IORING_ENTER_GETEVENTS, None, 0)
        # The kernel may signal the eventfd a moment after the completion shows (1 probe in
        # a few thousand here): the loop's reader then finds nothing to reap.
        with contextlib.suppress(BlockingIOError):
            os.read(self._eventfd, 8)
        results = self._reap()
        if results != [0]:
            code = -results[0] if results and results[0] < 0 else errno.EIO
            raise OSError(code, f"io_uring: {os.strerror(code)}")

    def submit(self, fd: int) -> None:
        self._push(_IORING_OP_FSYNC, fd, _IORING_FSYNC_DATASYNC)

    def _push(self, opcode: int, fd: int, fsync_flags: int) -> None:
        # Only this thread writes the submission ring, and the kernel reads it inside the
        # io_uring_enter below, on this thread: program order is all the ordering needed.
        ring = self._sq_ring
        tail = _U32.unpack_from(ring, self._sq_tail)[0]
        index = tail & self._sq_mask
        _SQE.pack_into(self._sqes, index * 64, opcode, _IOSQE_ASYNC, 0, fd, 0, 0, 0, fsync_flags, 0)
        _U32.pack_into(ring, self._sq_array + index * 4, index)
        _U32.pack_into(ring, self._sq_tail, (tail + 1) & 0xFFFFFFFF)
        self._in_flight += 1
        try:
            self._call(_IO_URING_ENTER, self._ring, 1, 0, 0, None, 0)
        except OSError:
            self._in_flight -= 1
            _U32.pack_into(ring, self._sq_tail, tail)
            raise

    def _reap(self) -> list[int]:
        # The eventfd read before this pairs with the kernel's signal after it filled the
        # completion ring.
        with self._lock:
            if self._closed:
                return []
            ring = self._cq_ring
            head = _U32.unpack_from(ring, self._cq_head)[0]
            tail = _U32.unpack_from(ring, self._cq_tail)[0]
            results = []
            while head != tail:
                offset = self._cqes + (head & self._cq_mask) * _CQE.size
                results.append(_CQE.unpack_from(ring, offset)[1])
                head = (head + 1) & 0xFFFFFFFF
            _U32.pack_into(ring, self._cq_head, head)
            self._in_flight -= len(results)
            return results

    def _on_signal(self) -> None:
        if self._closed:
            return
        try:
            os.read(self._eventfd, 8)
        except BlockingIOError:
            return
        for result in self._reap():
            self._done(-result if result < 0 else 0)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            # A sync under way ends before the log's files are closed. Waited for under the
            # lock: the loop cannot reap it meanwhile (this wait would then never end).
            if self._in_flight:
                with contextlib.suppress(OSError):
                    self._call(
                        _IO_URING_ENTER,
                        self._ring,
                        0,
                        self._in_flight,
                        _IORING_ENTER_GETEVENTS,
                        None,
                        0,
                    )
        # The reader goes before the eventfd's number can be reused, and only the loop's
        # thread may remove it.
        try:
            if self._loop.is_closed():
                raise RuntimeError("closed")
            if threading.get_ident() == self._loop_thread:
                self._release_on_loop()
            else:
                self._loop.call_soon_threadsafe(self._release_on_loop)
        except RuntimeError:
            self._release()

    def _release_on_loop(self) -> None:
        with contextlib.suppress(Exception):
            self._loop.remove_reader(self._eventfd)
        self._release()

    def _release(self) -> None:
        for mapped in self._maps:
            mapped.close()
        self._maps = []
        for fd in (self._eventfd, self._ring):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._eventfd = self._ring = -1


# -- a thread -----------------------------------------------------------------------------------


class ThreadSyncs:
    """A thread that runs each requested fdatasync and reports it on the loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, done: SyncDone) -> None:
        self._loop = loop
        self._done = done
        self._wanted = threading.Condition()
        self._fd: int | None = None
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="tier1-syncer", daemon=True)
        self._thread.start()

    def submit(self, fd: int) -> None:
        with self._wanted:
            self._fd = fd
            self._wanted.notify()

    def _run(self) -> None:
        while True:
            with self._wanted:
                while self._fd is None and not self._stopping:
                    self._wanted.wait()
                fd, self._fd = self._fd, None
            if fd is None:
                return
            try:
                os.fdatasync(fd)
                code = 0
            except OSError as e:
                code = e.errno or errno.EIO
            # RuntimeError: the loop is closed, so nobody waits for this sync any more.
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._done, code)

    def close(self) -> None:
        with self._wanted:
            self._stopping = True
            self._wanted.notify()
        if threading.current_thread() is not self._thread:
            self._thread.join()
