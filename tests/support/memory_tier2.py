"""A Tier 2 in memory, for component tests that need a real chunk storage but no disk: fast,
and honest about the contract of ``ChunkStorage`` (tests/tier2 runs its contract suite
against it).

An :class:`InMemoryTier2` holds the objects; each :class:`InMemoryChunkStorage` is one client
of it (clients see each other's writes, and closing one closes only it). With
``supports_append=False`` it behaves as S3 does: every chunk is written whole.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from segmentstore.tier2 import (
    BadChunkOffsetError,
    ChunkExistsError,
    ChunkNotFoundError,
    ChunkRangeError,
    ChunkStorage,
    ManifestConflictError,
    Tier2ClosedError,
    Tier2IOError,
)
from segmentstore.tier2.chunk_storage import Buffer, check_key, check_range, content_version


@dataclass
class InMemoryTier2:
    """The objects of one location, by key; one lock makes every call atomic."""

    objects: dict[str, bytearray] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def client(self, supports_append: bool = True) -> InMemoryChunkStorage:
        return InMemoryChunkStorage(self, supports_append)


class InMemoryChunkStorage(ChunkStorage):
    def __init__(self, location: InMemoryTier2, supports_append: bool = True) -> None:
        self.uri = f"memory://{id(location):x}"
        self.supports_append = supports_append
        self._location = location
        self._closed = False

    def create(self, key: str, parts: Sequence[Buffer]) -> None:
        with self._use(key) as objects:
            if key in objects:
                raise ChunkExistsError(key)
            objects[key] = bytearray(b"".join(bytes(p) for p in parts))

    def append(self, key: str, offset: int, parts: Sequence[Buffer]) -> None:
        check_range(offset, 0)
        if not self.supports_append:
            raise Tier2IOError(self.uri, key, "this location cannot append")
        with self._use(key) as objects:
            chunk = self._existing(objects, key)
            if len(chunk) != offset:
                raise BadChunkOffsetError(key, len(chunk), offset)
            for part in parts:
                chunk += part

    def read(self, key: str, offset: int, length: int) -> bytes:
        check_range(offset, length)
        with self._use(key) as objects:
            chunk = self._existing(objects, key)
            if offset + length > len(chunk):
                raise ChunkRangeError(key, offset, length, len(chunk))
            return bytes(chunk[offset : offset + length])

    def size(self, key: str) -> int:
        with self._use(key) as objects:
            return len(self._existing(objects, key))

    def exists(self, key: str) -> bool:
        with self._use(key) as objects:
            return key in objects

    def delete(self, key: str) -> None:
        with self._use(key) as objects:
            objects.pop(key, None)

    def list(
        self, prefix: str, start_after: str | None = None, limit: int | None = None
    ) -> list[str]:
        with self._use(None) as objects:
            keys = sorted(
                k
                for k in objects
                if k.startswith(prefix) and (start_after is None or k > start_after)
            )
            return keys if limit is None else keys[:limit]

    def get(self, key: str) -> tuple[bytes, str] | None:
        with self._use(key) as objects:
            data = objects.get(key)
            return None if data is None else (bytes(data), content_version(data))

    def put_if(self, key: str, data: bytes, expected_version: str | None) -> str:
        with self._use(key) as objects:
            current = objects.get(key)
            version = None if current is None else content_version(current)
            if version != expected_version:
                raise ManifestConflictError(key, f"version is {version}, not {expected_version}")
            objects[key] = bytearray(data)
            return content_version(data)

    def make_durable(self, key: str) -> None:
        with self._use(key):
            return  # memory is not durable anyway: what a test sees is what it keeps

    def close(self) -> None:
        self._closed = True

    def _use(self, key: str | None) -> _Locked:
        if key is not None:
            check_key(key)
        if self._closed:
            raise Tier2ClosedError(self.uri)
        return _Locked(self._location)

    @staticmethod
    def _existing(objects: dict[str, bytearray], key: str) -> bytearray:
        chunk = objects.get(key)
        if chunk is None:
            raise ChunkNotFoundError(key)
        return chunk


class _Locked:
    """``with`` the location's lock held, giving its objects."""

    def __init__(self, location: InMemoryTier2) -> None:
        self._location = location

    def __enter__(self) -> dict[str, bytearray]:
        self._location.lock.acquire()
        return self._location.objects

    def __exit__(self, *exc: object) -> None:
        self._location.lock.release()
