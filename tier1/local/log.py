"""``LocalDurableDataLog``: a ``DurableDataLog`` in one directory of a local file system.

It owns the lifecycle (open with recovery, close) and the operations that are not appends:
reading and truncation. Appends go through :class:`GroupCommit`. The on-disk format is
described in ``docs/formats.md`` (Tier 1 section).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from segmentstore.tier1.errors import (
    DataLogClosedError,
    DataLogCorruptionError,
    DataLogError,
    DataLogWriteError,
)
from segmentstore.tier1.local.directory import LogDirectory, Meta, wholly_below
from segmentstore.tier1.local.group_commit import GroupCommit
from segmentstore.tier1.local.recovery import recover_tail
from segmentstore.tier1.local.scanner import FileScanner, InvalidRecordError
from segmentstore.tier1.log import Buffer, DurableDataLog, LogRecord

DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024
DEFAULT_SEGMENT_MS = 600_000


@dataclass(frozen=True, slots=True)
class _Recovered:
    """What ``open`` found on disk, ready for appends."""

    meta: Meta
    fd: int  # the last file, open for appending
    file_bases: list[int]
    end: int  # where valid records end: the next append's address
    size_bytes: int


class LocalDurableDataLog(DurableDataLog):
    """A write-ahead log of files in ``directory``, a new file every ``segment_bytes``, or at the
    first append once the last file is ``segment_ms`` old (so that a quiet log can still delete
    its older records: truncation frees whole files only).

    Not thread-safe: call it from the event loop that opened it. It can be opened again after
    :meth:`close`.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        segment_ms: int = DEFAULT_SEGMENT_MS,
    ) -> None:
        if segment_bytes <= 0 or segment_ms <= 0:
            raise ValueError(
                f"segment_bytes ({segment_bytes}) and segment_ms ({segment_ms}) must be positive"
            )
        self._directory = LogDirectory(os.fspath(directory))
        self._segment_bytes = segment_bytes
        self._segment_ms = segment_ms
        self._epoch = 0
        self._truncated_below = 0
        self._commit: GroupCommit | None = None
        self._closer: asyncio.Task[None] | None = None
        self._truncate_lock = asyncio.Lock()
        # size_bytes = _base_bytes + bytes written since open - bytes deleted since open.
        self._base_bytes = 0
        self._deleted_bytes = 0

    @property
    def path(self) -> str:
        return self._directory.path

    def has_room(self, nbytes: int) -> bool:
        try:
            stats = os.statvfs(self.path)
        except OSError:
            return False
        return stats.f_bavail * stats.f_frsize >= nbytes

    # -- lifecycle ---------------------------------------------------------------------------

    async def open(self, min_epoch: int = 0) -> int:
        if self._commit is not None or self._closer is not None:
            raise DataLogError(f"data log {self.path} is already open")
        loop = asyncio.get_running_loop()
        recovering = asyncio.ensure_future(asyncio.to_thread(self._recover, min_epoch))
        try:
            recovered = await asyncio.shield(recovering)
        except asyncio.CancelledError:
            # The thread runs on: give back what it takes (the lock, the last file's fd).
            recovering.add_done_callback(self._abandon)
            raise
        self._epoch = recovered.meta.epoch
        self._truncated_below = recovered.meta.truncated_below
        self._base_bytes = recovered.size_bytes
        self._deleted_bytes = 0
        self._truncate_lock = asyncio.Lock()
        self._commit = GroupCommit(
            self._directory,
            fd=recovered.fd,
            file_bases=recovered.file_bases,
            end=recovered.end,
            segment_bytes=self._segment_bytes,
            segment_ms=self._segment_ms,
            loop=loop,
        )
        self._commit.start()
        return self._epoch

    def _abandon(self, recovering: asyncio.Future[_Recovered]) -> None:
        if not recovering.cancelled() and recovering.exception() is None:
            os.close(recovering.result().fd)
            self._directory.unlock()

    def _recover(self, min_epoch: int) -> _Recovered:
        directory = self._directory
        try:
            directory.lock()
        except OSError as e:
            raise _error_from(f"cannot lock data log {self.path}", e) from e
        try:
            return self._recover_locked(min_epoch)
        except OSError as e:
            directory.unlock()
            raise _error_from(f"cannot open data log {self.path}", e) from e
        except BaseException:
            directory.unlock()
            raise

    def _recover_locked(self, min_epoch: int) -> _Recovered:
        directory = self._directory
        old = directory.read_meta()
        meta = Meta(epoch=max(old.epoch + 1, min_epoch), truncated_below=old.truncated_below)
        directory.write_meta(meta)
        bases = directory.file_bases()
        fd: int | None = None
        end = -1
        if bases:
            last = bases[-1]
            end = last + recover_tail(directory.file_path(last), last)
        if end < meta.truncated_below:
            # An empty directory, or (only if files were removed by hand) a log that ends
            # below its truncation point: start a file there, so that every address the log
            # hands out from now on is visible to read().
            fd = directory.create_file(meta.truncated_below)
            bases.append(meta.truncated_below)
            end = meta.truncated_below
        try:
            # Finish a truncation that a crash interrupted after META was written.
            for base in wholly_below(bases, meta.truncated_below):
                directory.remove_file(base)
                bases.remove(base)
            if fd is None:
                fd = directory.open_for_append(bases[-1])
            size = sum(directory.file_size(base) for base in bases)
        except BaseException:
            if fd is not None:
                os.close(fd)
            raise
        return _Recovered(meta=meta, fd=fd, file_bases=bases, end=end, size_bytes=size)

    async def close(self) -> None:
        if self._closer is None:
            if self._commit is None:
                return
            self._closer = asyncio.create_task(self._shut_down(self._commit))
        # Shielded: a cancelled close() must not leave the threads half stopped.
        await asyncio.shield(self._closer)

    async def _shut_down(self, commit: GroupCommit) -> None:
        try:
            await commit.drain()
            await asyncio.to_thread(commit.stop)
        except BaseException:
            # Cancelled (the loop is shutting down) or worse: the lock must not be released
            # while the writer may still write, so stop it here, blocking if need be.
            commit.stop()
            raise
        finally:
            self._base_bytes = self._base_bytes + commit.written_bytes - self._deleted_bytes
            self._deleted_bytes = 0
            self._commit = None
            self._directory.unlock()
            self._closer = None

    # -- the contract ------------------------------------------------------------------------

    @property
    def epoch(self) -> int:
        """The epoch the last :meth:`open` returned (0 before the first)."""
        return self._epoch

    def append(self, parts: Sequence[Buffer]) -> asyncio.Future[int]:
        commit = self._commit
        if commit is None:
            future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
            future.set_exception(DataLogClosedError(f"data log {self.path} is not open"))
            return future
        return commit.append(parts)

    async def read(self, from_address: int = 0) -> AsyncIterator[LogRecord]:
        """See ``DurableDataLog.read``; sees the records written when iteration starts."""
        commit = self._require_open()
        start = max(from_address, self._truncated_below)
        bases = commit.file_bases()
        end = commit.written_end
        for i, base in enumerate(bases):
            # Files are contiguous: each one ends where the next begins.
            file_end = bases[i + 1] if i + 1 < len(bases) else end
            if file_end <= start:
                continue
            path = self._directory.file_path(base)
            scanner = FileScanner(path, base, file_end - base)
            try:
                while (batch := await asyncio.to_thread(scanner.next_batch, start)) is not None:
                    for record in batch:
                        yield record
            except InvalidRecordError as bad:
                raise DataLogCorruptionError(path, base + bad.position, bad.reason) from None
            except OSError as e:
                raise DataLogError(f"cannot read {path}: {e.strerror or e}") from e
            finally:
                scanner.close()
            if i + 1 < len(bases):
                size = await asyncio.to_thread(self._directory.file_size, base)
                overlap = size - (file_end - base)
                if overlap > 0:
                    raise DataLogCorruptionError(
                        path, file_end, f"file overlaps the next one by {overlap} bytes"
                    )

    async def truncate(self, below_address: int) -> None:
        """See ``DurableDataLog.truncate``. ``below_address`` may not exceed the next append's
        address: the addresses handed out after it would be hidden from :meth:`read`."""
        commit = self._require_open()
        if below_address > commit.next_address:
            raise ValueError(
                f"cannot truncate below {below_address}: the log ends at {commit.next_address}"
            )
        async with self._truncate_lock:
            if below_address <= self._truncated_below:
                return
            meta = Meta(epoch=self._epoch, truncated_below=below_address)
            try:
                await asyncio.to_thread(self._directory.write_meta, meta)
            except OSError as e:
                raise _error_from(f"cannot truncate data log {self.path}", e) from e
            self._truncated_below = below_address
            # Deleting after META is durable: a crash in between leaves files that the next
            # open deletes, never a META that still exposes deleted records.
            for base in wholly_below(commit.file_bases(), below_address):
                try:
                    freed = await asyncio.to_thread(self._directory.remove_file, base)
                except OSError as e:
                    raise _error_from(f"cannot truncate data log {self.path}", e) from e
                commit.forget_file(base)
                self._deleted_bytes += freed

    @property
    def size_bytes(self) -> int:
        commit = self._commit
        if commit is None:
            return self._base_bytes
        return self._base_bytes + commit.written_bytes - self._deleted_bytes

    def _require_open(self) -> GroupCommit:
        if self._commit is None or self._closer is not None:
            raise DataLogClosedError(f"data log {self.path} is not open")
        return self._commit


def _error_from(message: str, e: OSError) -> DataLogWriteError:
    return DataLogWriteError(f"{message}: {e.strerror or e}", errno=e.errno)
