"""``HdfsChunkStorage``: chunk storage in a directory of HDFS, through ``pyarrow.fs``.

Needs libhdfs, a JVM and the Hadoop jars at run time (``HADOOP_HOME`` or ``ARROW_LIBHDFS_DIR``,
``JAVA_HOME``, ``CLASSPATH``); where pyarrow cannot load them, opening raises
``Tier2UnavailableError`` saying so. This adapter has been exercised only up to that point: no
HDFS can run where it was written, and its conformance run skips.

What HDFS gives and how it is used:

* **Appends.** Chunks grow with ``open_append_stream``; a closed stream means the data reached
  every datanode of the pipeline (pyarrow offers no ``hsync``).
* **Single writer.** HDFS grants one client at a time the lease on a file being written. A
  ``put_if`` or ``delete`` holds the lease on ``.<name>.lock`` (an append stream kept open)
  while it compares and replaces, as the file backend holds an ``flock``. A holder that dies
  loses the lease when the name node's soft limit (60 s) passes.
* **Replacing.** pyarrow's ``move`` clobbers by deleting the target and then renaming, so for a
  moment the key names nothing. The new content is first written to a temporary file, then
  renamed to ``.<name>.pending`` (it is then complete and decided), then moved over the key.
  ``get`` reads ``.<name>.pending`` when the key is missing, and a later ``put_if`` finishes a
  replacement that a crash interrupted. Version tokens are content hashes.
* **Creating.** ``create`` checks that the key is free before and after writing its temporary
  file, but cannot make the final rename exclusive: chunk keys carry the writer's epoch, so two
  owners never create the same one.
"""

from __future__ import annotations

import errno
import posixpath
import secrets
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import dataclass, fields
from typing import Any
from urllib.parse import urlsplit

import pyarrow.fs as pafs

from segmentstore.tier2.arrow_storage import ARROW_ERRORS, ArrowChunkStorage
from segmentstore.tier2.chunk_storage import Buffer, check_range, content_version
from segmentstore.tier2.errors import (
    BadChunkOffsetError,
    ChunkExistsError,
    ChunkNotFoundError,
    InvalidTier2UriError,
    ManifestConflictError,
    Tier2Error,
    Tier2IOError,
    Tier2UnavailableError,
)

# Java exceptions (named in pyarrow's messages) of a name node that is away or not ready.
_UNAVAILABLE_MARKERS = (
    "ConnectException",
    "Connection refused",
    "SocketTimeoutException",
    "NoRouteToHostException",
    "StandbyException",
    "SafeModeException",
    "RetriableException",
    "timed out",
)
# ... and of a lease that another client holds.
_LEASE_MARKERS = ("AlreadyBeingCreatedException", "RecoveryInProgressException")
_LEASE_POLL_S = 0.2
_STRIPES = [threading.Lock() for _ in range(64)]


@dataclass(frozen=True, slots=True)
class HdfsOptions:
    user: str | None = None
    replication: int = 3
    lock_wait_s: float = 10.0  # how long put_if and delete wait for another writer's lease

    @staticmethod
    def parse(uri: str, given: Mapping[str, Any]) -> HdfsOptions:
        names = {f.name for f in fields(HdfsOptions)}
        if unknown := sorted(set(given) - names):
            raise InvalidTier2UriError(uri, f"unknown hdfs options {unknown}")
        options = HdfsOptions(**given)
        if options.user is not None and not isinstance(options.user, str):
            raise InvalidTier2UriError(uri, "option user must be a string")
        if not isinstance(options.replication, int) or options.replication < 1:
            raise InvalidTier2UriError(uri, "option replication must be a positive integer")
        if not isinstance(options.lock_wait_s, int | float) or options.lock_wait_s < 0:
            raise InvalidTier2UriError(uri, "option lock_wait_s must be a non-negative number")
        return options


class HdfsChunkStorage(ArrowChunkStorage):
    """Objects as files under ``root`` on the HDFS name node ``host:port``."""

    supports_append = True

    def __init__(self, host: str, port: int, root: str, options: HdfsOptions) -> None:
        uri = f"hdfs://{host}:{port}{root}"
        self._options = options
        try:
            fs = pafs.HadoopFileSystem(
                host, port, user=options.user, replication=options.replication
            )
        except ARROW_ERRORS as e:
            raise Tier2UnavailableError(uri, _load_failure(e)) from e
        super().__init__(uri, fs, root)
        try:
            fs.create_dir(root, recursive=True)
        except ARROW_ERRORS as e:
            raise self._translate(e, "") from e

    def create(self, key: str, parts: Sequence[Buffer]) -> None:
        path = self._path(key)
        temporary = _beside(path, f"{secrets.token_hex(8)}.tmp")
        try:
            if self._is_file(path):
                raise ChunkExistsError(key)
            self._write(temporary, parts)
            if self._is_file(path):
                self._fs.delete_file(temporary)
                raise ChunkExistsError(key)
            self._fs.move(temporary, path)
        except ARROW_ERRORS as e:
            with suppress(*ARROW_ERRORS):
                self._fs.delete_file(temporary)
            raise self._translate(e, key) from e

    def append(self, key: str, offset: int, parts: Sequence[Buffer]) -> None:
        path = self._path(key)
        check_range(offset, 0)
        size = self.size(key)
        if size != offset:
            raise BadChunkOffsetError(key, size, offset)
        try:
            with self._fs.open_append_stream(path) as out:
                for part in parts:
                    out.write(part)
        except ARROW_ERRORS as e:
            raise self._translate(e, key) from e

    def delete(self, key: str) -> None:
        path = self._path(key)
        try:
            with self._lease(key, path, remove=True):
                for victim in (path, _beside(path, "pending")):
                    with suppress(FileNotFoundError):
                        self._fs.delete_file(victim)
        except ARROW_ERRORS as e:
            raise self._translate(e, key) from e

    def get(self, key: str) -> tuple[bytes, str] | None:
        path = self._path(key)
        pending = _beside(path, "pending")
        try:
            # The key is missing for a moment while a put_if moves the pending content over it;
            # three looks see either the key or the pending file unless the key is really gone.
            for candidate in (path, pending, path):
                data = self._read_whole(candidate)
                if data is not None:
                    return data, content_version(data)
        except ARROW_ERRORS as e:
            raise self._translate(e, key) from e
        return None

    def put_if(self, key: str, data: bytes, expected_version: str | None) -> str:
        path = self._path(key)
        pending = _beside(path, "pending")
        temporary = _beside(path, f"{secrets.token_hex(8)}.tmp")
        try:
            with self._lease(key, path):
                if self._is_file(pending):  # a replacement that a crash interrupted
                    self._fs.move(pending, path)
                current = self._read_whole(path)
                if expected_version is None and current is not None:
                    raise ManifestConflictError(key, "expected no object, but one exists")
                if expected_version is not None:
                    if current is None:
                        raise ManifestConflictError(
                            key, f"expected version {expected_version}, but there is no object"
                        )
                    if (version := content_version(current)) != expected_version:
                        raise ManifestConflictError(
                            key, f"expected version {expected_version}, found {version}"
                        )
                self._write(temporary, [data])
                self._fs.move(temporary, pending)
                self._fs.move(pending, path)
        except ARROW_ERRORS as e:
            with suppress(*ARROW_ERRORS):
                self._fs.delete_file(temporary)
            raise self._translate(e, key) from e
        return content_version(data)

    # -- internals ---------------------------------------------------------------------------

    def _translate(self, e: BaseException, key: str) -> Tier2Error:
        if isinstance(e, FileNotFoundError):
            return ChunkNotFoundError(key)
        message = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        code = getattr(e, "errno", None)
        if any(marker in str(e) for marker in _UNAVAILABLE_MARKERS) or code in (
            errno.ECONNREFUSED,
            errno.ETIMEDOUT,
            errno.EHOSTUNREACH,
        ):
            return Tier2UnavailableError(self.uri, f"{key}: {message}" if key else message)
        return Tier2IOError(self.uri, key, message, code)

    def _key_of(self, path: str) -> str:
        # HDFS may list full URIs (hdfs://host:port/root/...); keys are relative to the root.
        if "://" in path:
            path = urlsplit(path).path
        return path[len(self._root) + 1 :]

    def _is_file(self, path: str) -> bool:
        return bool(self._fs.get_file_info(path).type == pafs.FileType.File)

    def _write(self, path: str, parts: Sequence[Buffer]) -> None:
        self._fs.create_dir(posixpath.dirname(path), recursive=True)
        with self._fs.open_output_stream(path) as out:
            for part in parts:
                out.write(part)

    def _read_whole(self, path: str) -> bytes | None:
        try:
            with self._fs.open_input_stream(path) as f:
                return bytes(f.read())
        except FileNotFoundError:
            return None

    @contextmanager
    def _lease(self, key: str, path: str, *, remove: bool = False) -> Iterator[None]:
        """Hold the HDFS lease on the lock file of ``path`` (an append stream left open); with
        ``remove``, delete the lock file before letting go (waiters then make a new one)."""
        lock = _beside(path, "lock")
        deadline = time.monotonic() + self._options.lock_wait_s
        # Threads of this process take turns first: HDFS clients of one process may share one
        # DFSClient, and so one lease holder.
        stripe = _STRIPES[hash(f"{self.uri}{lock}") % len(_STRIPES)]
        with stripe, self._held_lease(key, lock, deadline, remove=remove):
            yield

    @contextmanager
    def _held_lease(self, key: str, lock: str, deadline: float, *, remove: bool) -> Iterator[None]:
        while True:
            try:
                if not self._is_file(lock):
                    self._write(lock, [])
                stream = self._fs.open_append_stream(lock)
                break
            except FileNotFoundError:
                continue  # a delete removed the lock file between our two calls
            except OSError as e:
                if not any(marker in str(e) for marker in _LEASE_MARKERS):
                    raise
                if time.monotonic() >= deadline:
                    raise ManifestConflictError(
                        key, f"another writer has held the lease on {lock} too long"
                    ) from e
                time.sleep(_LEASE_POLL_S)
        try:
            yield
            if remove:
                self._fs.delete_file(lock)
        finally:
            with suppress(*ARROW_ERRORS) if remove else nullcontext():
                stream.close()  # fails once the file is deleted: the lease goes with it


def _beside(path: str, suffix: str) -> str:
    directory, name = posixpath.split(path)
    return f"{directory}/.{name}.{suffix}"


def _load_failure(e: BaseException) -> str:
    first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    if "libhdfs" in str(e) or "libjvm" in str(e):
        return (
            "pyarrow's HadoopFileSystem cannot load libhdfs and a JVM here; it needs a Hadoop "
            "client (HADOOP_HOME or ARROW_LIBHDFS_DIR), JAVA_HOME and the Hadoop jars on "
            f"CLASSPATH ({first})"
        )
    return first
