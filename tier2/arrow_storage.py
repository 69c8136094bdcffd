"""``ArrowChunkStorage``: what ``pyarrow.fs`` does for every remote backend (ranged reads, sizes,
listings), shared by the S3 and HDFS adapters, which add writes and translate errors."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterable

import pyarrow as pa
import pyarrow.fs as pafs

from segmentstore.tier2.chunk_storage import ChunkStorage, StampedKeys, check_key, check_range
from segmentstore.tier2.errors import (
    ChunkNotFoundError,
    ChunkRangeError,
    Tier2ClosedError,
    Tier2Error,
)
from segmentstore.tier2.listing import list_keys, list_stamped_keys

# What pyarrow raises: OSError (ArrowIOError is one) for I/O, other ArrowExceptions otherwise.
ARROW_ERRORS = (OSError, pa.ArrowException)


class ArrowChunkStorage(ChunkStorage):
    """Objects as files of a ``pyarrow.fs.FileSystem`` under ``root`` (``bucket/prefix`` for S3,
    an absolute path for HDFS)."""

    def __init__(self, uri: str, fs: pafs.FileSystem, root: str) -> None:
        self.uri = uri
        self._fs = fs
        self._root = root.rstrip("/")
        self._closed = False

    @abstractmethod
    def _translate(self, e: BaseException, key: str) -> Tier2Error:
        """The Tier 2 error for a backend error met while working on ``key``."""

    def read(self, key: str, offset: int, length: int) -> bytes:
        path = self._path(key)
        check_range(offset, length)
        try:
            with self._fs.open_input_file(path) as f:
                size = int(f.size())
                if offset + length > size:
                    raise ChunkRangeError(key, offset, length, size)
                data = bytes(f.read_at(length, offset)) if length else b""
        except FileNotFoundError as e:
            raise ChunkNotFoundError(key) from e
        except ARROW_ERRORS as e:
            raise self._translate(e, key) from e
        if len(data) != length:  # it was replaced by a shorter one under us
            raise ChunkRangeError(key, offset, length, offset + len(data))
        return data

    def size(self, key: str) -> int:
        info = self._info(key)
        if info.type != pafs.FileType.File:
            raise ChunkNotFoundError(key)
        return int(info.size)

    def exists(self, key: str) -> bool:
        return bool(self._info(key).type == pafs.FileType.File)

    def list(
        self, prefix: str, start_after: str | None = None, limit: int | None = None
    ) -> list[str]:
        self._check_open()
        directory = prefix.rpartition("/")[0]
        if directory:
            check_key(directory)
        try:
            return list_keys(self._children, prefix, start_after, limit)
        except ARROW_ERRORS as e:
            raise self._translate(e, prefix) from e

    def _children(self, directory: str) -> Iterable[tuple[str, bool, str]]:
        base = f"{self._root}/{directory}" if directory else self._root
        selector = pafs.FileSelector(base, recursive=False, allow_not_found=True)
        return [
            (
                str(info.path).rpartition("/")[2],
                info.type == pafs.FileType.Directory,
                f"{info.mtime_ns}-{info.size}" if info.type == pafs.FileType.File else "",
            )
            for info in self._fs.get_file_info(selector)
            if info.type in (pafs.FileType.File, pafs.FileType.Directory)
        ]

    def list_stamped(self, prefix: str) -> StampedKeys:
        self._check_open()
        directory = prefix.rpartition("/")[0]
        if directory:
            check_key(directory)
        try:
            return list_stamped_keys(self._children, prefix)
        except ARROW_ERRORS as e:
            raise self._translate(e, prefix) from e

    def make_durable(self, key: str) -> None:
        return None  # an S3 object or an HDFS file (closed, then renamed) is seen once durable

    def close(self) -> None:
        self._closed = True

    # -- for the adapters --------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise Tier2ClosedError(self.uri)

    def _path(self, key: str) -> str:
        self._check_open()
        return f"{self._root}/{check_key(key)}"

    def _key_of(self, path: str) -> str:
        """The key of a path the file system listed."""
        return path[len(self._root) + 1 :]

    def _info(self, key: str) -> pafs.FileInfo:
        path = self._path(key)
        try:
            return self._fs.get_file_info(path)
        except ARROW_ERRORS as e:
            raise self._translate(e, key) from e
