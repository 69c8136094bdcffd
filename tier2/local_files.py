"""Durable primitives of the file backend over plain ``os`` calls: whole writes with
``pwritev``, exact reads with ``pread``, directories made and fsynced into their parents, an
``flock`` that survives its file being deleted, and directory cleanup that concurrent writers
tolerate. Every function blocks and raises ``OSError``; ``FileChunkStorage`` translates.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from segmentstore.tier2.chunk_storage import Buffer

_IOV_MAX = 1024
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
def locked(directory: str, name: str, *, create_directory: bool) -> Iterator[str | None]:
    """Hold ``flock`` on ``directory/.name.lock``; yield its path, or None if the directory does
    not exist and ``create_directory`` is False."""
    lock_path = os.path.join(directory, f".{name}.lock")
    while True:
        try:
            if create_directory:
                fd = retry_if_directory_vanishes(
                    directory, lambda: os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC)
                )
            else:
                fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC)
        except FileNotFoundError:
            if create_directory:
                raise
            yield None
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            # A delete removes the lock file while holding it; whoever waited on the removed
            # file must lock the current one instead.
            held = os.fstat(fd)
            try:
                current = os.stat(lock_path)
            except FileNotFoundError:
                current = None
        except BaseException:
            os.close(fd)
            raise
        if current is not None and (current.st_dev, current.st_ino) == (held.st_dev, held.st_ino):
            break
        os.close(fd)
    try:
        yield lock_path
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


def walk(path: str, key_prefix: str) -> Iterator[str]:
    try:
        entries = list(os.scandir(path))
    except (FileNotFoundError, NotADirectoryError):
        return
    for entry in entries:
        if entry.name.startswith("."):
            continue
        key = f"{key_prefix}/{entry.name}" if key_prefix else entry.name
        try:
            if entry.is_dir(follow_symlinks=False):
                yield from walk(entry.path, key)
            elif entry.is_file():
                yield key
        except FileNotFoundError:
            continue  # deleted while we listed


def fsync_directory(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
