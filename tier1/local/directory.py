"""One log directory on disk: its lock, its META file and the names of its log files.

Layout::

    LOCK                   flock(LOCK_EX | LOCK_NB) held while the log is open
    META                   {"format": 1, "epoch": N, "truncated_below": A}, replaced atomically
    00000000000000000000.log, ...
                           log files, named by the address of their first record

Every method does blocking I/O: call them from a worker thread.
"""

from __future__ import annotations

import errno
import fcntl
import itertools
import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass

from segmentstore.tier1.errors import DataLogError, DataLogLockedError

META_FORMAT = 1
LOCK_NAME = "LOCK"
META_NAME = "META"
_META_TEMP_NAME = "META.tmp"
_LOG_NAME = re.compile(r"^(\d{20})\.log$")


@dataclass(frozen=True, slots=True)
class Meta:
    epoch: int
    truncated_below: int


def log_file_name(base_address: int) -> str:
    # Zero-padded to the 20 digits of 2**64 so that names sort like addresses.
    return f"{base_address:020d}.log"


class LogDirectory:
    def __init__(self, path: str) -> None:
        self.path = path
        self._lock_fd: int | None = None

    # -- ownership ---------------------------------------------------------------------------

    def lock(self) -> None:
        """Create the directory if needed and take its lock, or raise DataLogLockedError.

        flock locks belong to an open file description, so a second open in this same process
        conflicts as surely as one from another process, and the kernel drops the lock if the
        process dies.
        """
        _make_directories(os.path.abspath(self.path))
        fd = os.open(os.path.join(self.path, LOCK_NAME), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise DataLogLockedError(self.path) from None
            raise
        self._lock_fd = fd

    def unlock(self) -> None:
        # The LOCK file itself stays: deleting it would let two owners lock different inodes.
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    # -- META --------------------------------------------------------------------------------

    def read_meta(self) -> Meta:
        """The persisted META; a directory without one is at epoch 0 and truncated below 0."""
        path = os.path.join(self.path, META_NAME)
        try:
            with open(path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return Meta(epoch=0, truncated_below=0)
        try:
            doc = json.loads(raw)
            if doc["format"] != META_FORMAT:
                raise DataLogError(f"{path}: unsupported META format {doc['format']!r}")
            epoch, truncated_below = doc["epoch"], doc["truncated_below"]
            if not all(isinstance(n, int) and n >= 0 for n in (epoch, truncated_below)):
                raise TypeError("epoch and truncated_below must be non-negative integers")
        except (ValueError, KeyError, TypeError) as e:
            raise DataLogError(f"{path}: unreadable META: {e}") from e
        return Meta(epoch=epoch, truncated_below=truncated_below)

    def write_meta(self, meta: Meta) -> None:
        """Replace META atomically and durably: temp file, fsync, rename, fsync directory."""
        doc = {"format": META_FORMAT, "epoch": meta.epoch, "truncated_below": meta.truncated_below}
        temp = os.path.join(self.path, _META_TEMP_NAME)
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            data = json.dumps(doc).encode()
            written = 0
            while written < len(data):
                written += os.write(fd, data[written:])
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, os.path.join(self.path, META_NAME))
        self.sync()

    # -- log files ---------------------------------------------------------------------------

    def file_path(self, base_address: int) -> str:
        return os.path.join(self.path, log_file_name(base_address))

    def file_bases(self) -> list[int]:
        """The base addresses of the log files present, ascending."""
        bases = []
        for name in os.listdir(self.path):
            match = _LOG_NAME.match(name)
            if match:
                bases.append(int(match.group(1)))
        bases.sort()
        return bases

    def create_file(self, base_address: int) -> int:
        """Create an empty log file, make its name durable, and return it open for appending."""
        fd = os.open(
            self.file_path(base_address),
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC,
            0o644,
        )
        try:
            # Records in the file are acknowledged only after an fdatasync of the file, which
            # does not persist its directory entry: without this a crash could lose the file.
            self.sync()
        except BaseException:
            os.close(fd)
            raise
        return fd

    def open_for_append(self, base_address: int) -> int:
        return os.open(self.file_path(base_address), os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)

    def file_size(self, base_address: int) -> int:
        return os.stat(self.file_path(base_address)).st_size

    def remove_file(self, base_address: int) -> int:
        """Delete one log file; return the bytes it held."""
        path = self.file_path(base_address)
        size = os.stat(path).st_size
        os.unlink(path)
        return size

    def sync(self) -> None:
        _fsync_directory(self.path)


def wholly_below(bases: Iterable[int], address: int) -> list[int]:
    """The files whose every record lies below ``address``: those whose successor starts at or
    below it. The last file never qualifies: it is the one being written."""
    return [base for base, successor in itertools.pairwise(bases) if successor <= address]


def _make_directories(path: str) -> None:
    """``mkdir -p``, fsyncing the parent of every directory it makes: a directory's name
    survives a power loss only once its parent is synced, and the log's records with it."""
    if os.path.isdir(path):
        return
    _make_directories(os.path.dirname(path))
    try:
        os.mkdir(path)
    except FileExistsError:
        return
    _fsync_directory(os.path.dirname(path))


def _fsync_directory(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
