"""Group commit: the append pipeline of a local log, from the event loop to disk and back.

Records pass along. Each party takes everything that piled up while it was busy::

    event loop          writer thread               the kernel               event loop
    append(): assign    take ALL queued records,    fdatasync the file       resolve, in order,
    the address, queue  header + CRC, writev, roll  (one request under       every future whose
    a future            files, advance written_end  way, from the loop)      record ends <= it

The writer never waits for an fdatasync (except once per file, when it rolls): while one sync
covers what was written so far, the writer writes the next records, and one fdatasync covers
every record written before it began. The loop asks for each sync and hears it end on the loop
(:mod:`sync_requests`: an io_uring, else a thread), so no thread of ours takes the
GIL per sync.

A shortcut: when the writer thread is parked with nothing queued, the event loop writes a small
record itself (the ``writev`` into the page cache takes tens of microseconds), because a woken
thread must first get the GIL from the busy loop, which costs more than the write. The loop is
then the writer: the thread stays parked until the loop queues it something. Rolls and large
records always go through the thread.

Failure: the first OSError of a write, roll or fdatasync fails the futures of every record not
yet durable, and every later append fails at once until the log is reopened.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections import deque
from collections.abc import Sequence

from segmentstore.tier1.errors import DataLogClosedError, DataLogWriteError
from segmentstore.tier1.local.directory import LogDirectory
from segmentstore.tier1.local.record import HEADER_SIZE, MAX_PAYLOAD, encode_header
from segmentstore.tier1.local.sync_requests import SyncRequests, open_sync_requests
from segmentstore.tier1.local.vectored_write import IOV_MAX, writev_all
from segmentstore.tier1.log import Buffer

# The writer reports a piece written at least every FLUSH_BYTES, so that with large records
# the fdatasync of one piece overlaps the write of the next.
FLUSH_BYTES = 2 * 1024 * 1024
# Records up to this size are written by the event loop itself when the writer thread is idle.
INLINE_MAX_BYTES = 256 * 1024

# (address, payload length, payload parts) of a record waiting for the writer.
_Queued = tuple[int, int, tuple[Buffer, ...]]


class _RollSyncError(Exception):
    """The fdatasync of a file being rolled away failed: nothing more may be acknowledged."""

    def __init__(self, error: DataLogWriteError) -> None:
        super().__init__(str(error))
        self.error = error


class GroupCommit:
    """Appends records to the log's last file, rolling files at ``segment_bytes`` or, at the
    next write, once the file has been written to for ``segment_ms``.

    ``fd`` is the last file, open for appending, whose records end at address ``end``;
    ``file_bases`` lists every file of the log, the last one included.
    """

    def __init__(
        self,
        directory: LogDirectory,
        *,
        fd: int,
        file_bases: Sequence[int],
        end: int,
        segment_bytes: int,
        segment_ms: int,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self._directory = directory
        self._segment_bytes = segment_bytes
        self._segment_s = segment_ms / 1000
        self._loop = loop
        self._create_future = loop.create_future

        # Event loop thread only.
        self._loop_thread = threading.get_ident()  # built on the loop
        self._next_address = end
        self._inflight: deque[tuple[int, asyncio.Future[int], int]] = deque()
        self._accepting = True
        self._failure: DataLogWriteError | None = None
        self._drained: asyncio.Future[None] | None = None
        self._synced_end = end
        self._syncing_to: int | None = None  # the target of the sync under way
        self._syncs: SyncRequests = open_sync_requests(loop, self._on_synced)

        # Shared between the threads, guarded by _lock. The writer waits on _work.
        self._lock = threading.Lock()
        self._work = threading.Condition(self._lock)
        self._pending: list[_Queued] = []
        self._writer_idle = False
        self._writer_stopping = False
        self._written_end = end
        self._written_bytes = 0
        self._fd = fd
        self._retired_fds: list[int] = []  # rolled away; closed once no sync can be using them
        self._file_bases = list(file_bases)
        self._error: DataLogWriteError | None = None
        self._final_sync_allowed = False
        self._sync_posted = False  # the writer thread asked the loop to look for a sync
        self._syncs_closed = False

        # Writer thread only.
        self._file_base = self._file_bases[-1]
        self._write_end = end
        # The age of a file counts from its first record written by this process.
        self._file_started: float | None = None

        self._stop_lock = threading.Lock()
        self._stopped = False
        self._writer = threading.Thread(target=self._run_writer, name="tier1-writer", daemon=True)

    def start(self) -> None:
        self._writer.start()

    # -- event loop side ---------------------------------------------------------------------

    @property
    def next_address(self) -> int:
        """The address the next append gets."""
        return self._next_address

    @property
    def written_end(self) -> int:
        """Where the records written so far end (not necessarily durable yet)."""
        return self._written_end

    @property
    def written_bytes(self) -> int:
        return self._written_bytes

    def file_bases(self) -> list[int]:
        with self._lock:
            return list(self._file_bases)

    def forget_file(self, base: int) -> None:
        with self._lock:
            self._file_bases.remove(base)

    def append(self, parts: Sequence[Buffer]) -> asyncio.Future[int]:
        """Queue a record; see ``DurableDataLog.append``. Call on the event loop thread."""
        loop = self._loop
        if asyncio.get_running_loop() is not loop:
            raise RuntimeError("append must be called on the event loop that opened the log")
        if not self._accepting:
            return _failed(loop, DataLogClosedError("data log is closed"))
        if self._failure is not None:
            return _failed(loop, _copy(self._failure))
        # Our own copy of the sequence (free for a tuple): the writer reads it later, and a
        # caller reusing its list, or passing an iterator, would desynchronise the length.
        parts = tuple(parts)
        length = 0
        for part in parts:
            if isinstance(part, memoryview):
                if not part.c_contiguous:
                    raise ValueError("memoryview parts must be C-contiguous")
                length += part.nbytes
            else:
                length += len(part)
        if length > MAX_PAYLOAD:
            raise ValueError(f"record of {length} bytes exceeds {MAX_PAYLOAD}")
        address = self._next_address
        end = address + HEADER_SIZE + length
        self._next_address = end
        future = self._create_future()
        self._inflight.append((end, future, address))
        record = (address, length, parts)
        with self._lock:
            # The writer is parked with nothing queued, and only this thread wakes it: then
            # this thread may act as the writer. A small record is written here at once,
            # instead of waiting for the woken writer to get the GIL from a busy loop (the
            # largest part of a small append's latency). Rolls (they fdatasync the old file)
            # and large records (long copies) stay on the writer thread.
            inline = (
                self._writer_idle
                and not self._pending
                and self._error is None
                and length <= INLINE_MAX_BYTES
                and not self._roll_due()
            )
            if not inline:
                self._pending.append(record)
                if self._writer_idle:
                    # Cleared here, not by the writer: until the woken writer gets the GIL,
                    # every append would otherwise call notify() again, for nothing.
                    self._writer_idle = False
                    self._work.notify()
                return future
        self._write_or_fail([record])
        return future

    async def drain(self) -> None:
        """Refuse further appends and wait until every queued one is resolved or failed."""
        self._accepting = False
        if self._inflight:
            self._drained = self._loop.create_future()
            await self._drained

    def _on_progress(self, synced_end: int, error: DataLogWriteError | None) -> None:
        # Runs on the loop: one call per fdatasync, whatever the number of records it covered.
        inflight = self._inflight
        while inflight and inflight[0][0] <= synced_end:
            _, future, address = inflight.popleft()
            if not future.done():
                future.set_result(address)
        if error is not None and self._failure is None:
            self._failure = error
            while inflight:
                _, future, _ = inflight.popleft()
                if not future.done():
                    future.set_exception(_copy(error))
        drained = self._drained
        if not inflight and drained is not None and not drained.done():
            drained.set_result(None)

    # -- shutdown (blocking: call from a worker thread) --------------------------------------

    def stop(self) -> None:
        """Let the writer finish what is queued; join it; wait for a sync under way; close.

        Idempotent, and safe to call from two threads at once (the second waits). What the
        writer wrote after :meth:`drain` is not synced here: nobody waits for it.
        """
        with self._stop_lock:
            if self._stopped:
                return
            with self._lock:
                self._writer_stopping = True
                self._work.notify()
            self._writer.join()
            with self._lock:
                self._syncs_closed = True
            self._syncs.close()
            with self._lock:
                fds, self._retired_fds = [self._fd, *self._retired_fds], []
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
            self._stopped = True

    # -- writer thread -----------------------------------------------------------------------

    def _run_writer(self) -> None:
        while True:
            with self._lock:
                while not self._pending and not self._writer_stopping and self._error is None:
                    self._writer_idle = True
                    self._work.wait()
                self._writer_idle = False
                if self._error is not None or not self._pending:
                    return
                batch = self._pending
                self._pending = []
            if not self._write_or_fail(batch):
                return

    def _roll_due(self) -> bool:
        """Whether the next record starts a new file (writer state: call as the writer)."""
        file_size = self._write_end - self._file_base
        if file_size >= self._segment_bytes:
            return True
        started = self._file_started
        return (
            file_size > 0 and started is not None and time.monotonic() - started >= self._segment_s
        )

    def _write_or_fail(self, batch: list[_Queued]) -> bool:
        """Write ``batch`` (as the writer); on failure fail the log and return False."""
        try:
            self._write(batch)
            return True
        except _RollSyncError as e:
            self._fail(e.error, final_sync_allowed=False)
        except OSError as e:
            # A failed write does not undo earlier writes: they may still be synced and
            # acknowledged, and everything from the failed batch on fails.
            self._fail(self._error_from("write", e), final_sync_allowed=True)
            self._drop_torn_bytes()
        except BaseException as e:
            # A bug must not leave futures pending forever.
            self._fail(DataLogWriteError(f"writer died: {e!r}"), final_sync_allowed=False)
        return False

    def _write(self, batch: list[_Queued]) -> None:
        end = self._write_end
        # Full or old enough: roll before this batch (file_size counts as full).
        file_size = self._segment_bytes if self._roll_due() else end - self._file_base
        if self._file_started is None:
            self._file_started = time.monotonic()
        iov: list[Buffer] = []
        iov_bytes = 0
        for address, length, parts in batch:
            if file_size >= self._segment_bytes:
                if iov:
                    self._flush(iov, iov_bytes, end)
                    iov, iov_bytes = [], 0
                self._roll(end)
                file_size = 0
            elif iov and (len(iov) + len(parts) >= IOV_MAX or iov_bytes >= FLUSH_BYTES):
                self._flush(iov, iov_bytes, end)
                iov, iov_bytes = [], 0
            iov.append(encode_header(address, length, parts))
            iov.extend(parts)
            size = HEADER_SIZE + length
            iov_bytes += size
            file_size += size
            end = address + size
        if iov:
            self._flush(iov, iov_bytes, end)

    def _drop_torn_bytes(self) -> None:
        """Cut what a failed write left past the last whole record: recovery would cut it
        anyway (a torn tail), and on a full disk those are the only bytes that can be given
        back at once, which the truncation behind Tier 2 needs to write the log's META."""
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, self._write_end - self._file_base)

    def _flush(self, iov: list[Buffer], nbytes: int, end: int) -> None:
        writev_all(self._fd, iov, nbytes)
        self._write_end = end
        with self._lock:
            self._written_end = end
            self._written_bytes += nbytes
        self._ask_for_sync()

    def _roll(self, base: int) -> None:
        # Sync the old file before the new one exists: then after a crash only the last file
        # can have a torn tail, which is all that recovery scans. Once per file, so cheap.
        try:
            os.fdatasync(self._fd)
        except OSError as e:
            raise _RollSyncError(self._error_from("fdatasync", e)) from e
        fd = self._directory.create_file(base)
        with self._lock:
            # A sync under way may be on the old fd: the loop closes it once none is.
            self._retired_fds.append(self._fd)
            self._fd = fd
            self._file_bases.append(base)
        self._file_base = base
        self._file_started = time.monotonic()

    def _fail(self, error: DataLogWriteError, *, final_sync_allowed: bool) -> None:
        with self._lock:
            if self._error is None:
                self._error = error
                self._final_sync_allowed = final_sync_allowed
        self._ask_for_sync()

    def _ask_for_sync(self) -> None:
        """Have the loop look at what is written (from either thread)."""
        if threading.get_ident() == self._loop_thread:
            self._sync_if_due()
            return
        with self._lock:
            if self._sync_posted:
                return
            self._sync_posted = True
        # RuntimeError: the loop is closed, so nobody waits for these records any more.
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._sync_if_due)

    # -- syncing (event loop thread) ---------------------------------------------------------

    def _sync_if_due(self) -> None:
        """Start a sync of what is written, unless one is under way (its end calls this
        again); report a failure once nothing more can be synced."""
        if self._syncing_to is not None:
            return
        with self._lock:
            if self._syncs_closed:
                return
            self._sync_posted = False
            target = self._written_end
            fd = self._fd
            error = self._error
            may_sync = error is None or self._final_sync_allowed
            # No sync is under way and the writer has moved on from these: safe to close.
            retired, self._retired_fds = self._retired_fds, []
        for old in retired:
            with contextlib.suppress(OSError):
                os.close(old)
        if target > self._synced_end and may_sync:
            # Files rolled away were synced by the writer before the roll, so the current
            # file is the only one that can hold unsynced records.
            try:
                self._syncs.submit(fd)
            except OSError as e:
                self._sync_failed(self._error_from("fdatasync", e))
                return
            self._syncing_to = target
        elif error is not None:
            self._on_progress(self._synced_end, error)

    def _on_synced(self, code: int) -> None:
        target = self._syncing_to
        self._syncing_to = None
        if target is None:
            return
        if code:
            error = OSError(code, os.strerror(code))
            self._sync_failed(self._error_from("fdatasync", error))
            return
        self._synced_end = target
        self._on_progress(target, None)
        self._sync_if_due()

    def _sync_failed(self, failure: DataLogWriteError) -> None:
        with self._lock:
            # After a failed fdatasync the kernel may have dropped the dirty pages: a later
            # sync could succeed without them, so nothing more is acknowledged.
            if self._error is None:
                self._error = failure
            self._final_sync_allowed = False
            self._work.notify()
            failure = self._error
        self._on_progress(self._synced_end, failure)

    def _error_from(self, operation: str, e: OSError) -> DataLogWriteError:
        return DataLogWriteError(
            f"{operation} in data log {self._directory.path} failed: {e.strerror or e}",
            errno=e.errno,
        )


def _failed(loop: asyncio.AbstractEventLoop, error: Exception) -> asyncio.Future[int]:
    future: asyncio.Future[int] = loop.create_future()
    future.set_exception(error)
    return future


def _copy(error: DataLogWriteError) -> DataLogWriteError:
    # One instance per future: a raised exception accumulates its traceback.
    return DataLogWriteError(str(error), errno=error.errno)
