"""Durable primitives of the file backend over plain ``os`` calls: whole writes with
``pwritev``, exact reads with ``pread``, directories made and fsynced into their parents,
``flock`` on a fixed set of shared lock files, and directory cleanup that concurrent writers
tolerate. Every function blocks and raises ``OSError``; ``FileChunkStorage`` translates.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from segmentstore.tier2.chunk_storage import Buffer

_IOV_MAX = 1024
# Lock files shared by all objects (a put_if and a delete of one key take turns).
_LOCK_STRIPES = 256
# How often a writer recreates a directory that a concurrent delete removed (it was empty).
_VANISHED_DIRECTORY_RETRIES = 8


def open_file(path: str, flags: int) -> int:
    """An fd on the regular file at ``path``; ``FileNotFoundError`` for anything else."""
    try:
        fd = os.open(path, flags | os.O_CLOEXEC)
    except (NotADirectoryError, IsADirectoryError) as e:
        raise FileNotFoundError(errno.ENOENT, "not a file", path) from e
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise FileNotFoundError(errno.ENOENT, "not a file", path)
    return fd


def read_whole(path: str) -> bytes | None:
    try:
        fd = open_file(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        pieces = []
        while piece := os.read(fd, 1 << 20):
            pieces.append(piece)
        return b"".join(pieces)
    finally:
        os.close(fd)


def read_at(fd: int, offset: int, length: int) -> bytes:
    data = os.pread(fd, length, offset)
    if len(data) == length or not data:
        return data
    pieces = [data]
    done = len(data)
    while done < length and (piece := os.pread(fd, length - done, offset + done)):
        pieces.append(piece)
        done += len(piece)
    return b"".join(pieces)


def write_all(fd: int, offset: int, parts: Sequence[Buffer]) -> None:
    views = [memoryview(part).cast("B") for part in parts if len(part)]
    position, i = offset, 0
    while i < len(views):
        written = os.pwritev(fd, views[i : i + _IOV_MAX], position)
        if written <= 0:
            raise OSError(errno.EIO, "write made no progress")
        position += written
        while written:
            head = views[i]
            if written >= len(head):
                written -= len(head)
                i += 1
            else:
                views[i] = head[written:]
                written = 0


@contextmanager
def locked(lock_directory: str, key: str) -> Iterator[None]:
    """Hold ``flock`` on the lock file of ``key``: one of a fixed set of files in
    ``lock_directory``, chosen by a hash of the key, so that an object costs no lock file of
    its own. Two keys may share a lock; a lock file is never removed."""
    stripe = zlib.crc32(key.encode()) % _LOCK_STRIPES
    path = os.path.join(lock_directory, f"{stripe:03d}")
    fd = retry_if_directory_vanishes(
        lock_directory, lambda: os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    )
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def retry_if_directory_vanishes(directory: str, create: Callable[[], int]) -> int:
    """Make ``directory``, then call ``create``, again if an empty-directory cleanup removed it
    in between."""
    for attempt in range(_VANISHED_DIRECTORY_RETRIES):
        try:
            make_directories(directory)
            return create()
        except FileNotFoundError:
            if attempt == _VANISHED_DIRECTORY_RETRIES - 1:
                raise
    raise AssertionError("unreachable")


def make_directories(path: str) -> None:
    """``os.makedirs``, fsyncing the parent of every directory it creates."""
    if os.path.isdir(path):
        return
    parent = os.path.dirname(path)
    if parent != path:
        make_directories(parent)
    try:
        os.mkdir(path, 0o755)
    except FileExistsError:
        return
    fsync_directory(parent)


def remove_empty_directories(directory: str, root: str) -> None:
    while directory != root and directory.startswith(root + os.sep):
        try:
            os.rmdir(directory)
        except OSError:
            return  # not empty (or already gone): its parents are not empty either
        directory = os.path.dirname(directory)


def fsync_directory(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
