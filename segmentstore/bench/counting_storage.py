"""A chunk storage that notes every object it reads and every prefix it lists: how many Tier 2
objects a reader (a Spark plan, a listing) touches."""

from __future__ import annotations

from collections.abc import Sequence

from segmentstore.tier2 import Buffer, ChunkStorage
from segmentstore.tier2.chunk_storage import StampedKeys


class CountingStorage(ChunkStorage):
    def __init__(self, inner: ChunkStorage) -> None:
        self.inner = inner
        self.uri = inner.uri
        self.supports_append = inner.supports_append
        self.concurrent_writes = inner.concurrent_writes
        # Keys read (get, read, size, exists) and prefixes listed, in order, repeats kept.
        self.touched: list[str] = []

    def create(self, key: str, parts: Sequence[Buffer]) -> None:
        self.inner.create(key, parts)

    def append(self, key: str, offset: int, parts: Sequence[Buffer]) -> None:
        self.inner.append(key, offset, parts)

    def read(self, key: str, offset: int, length: int) -> bytes:
        self.touched.append(key)
        return self.inner.read(key, offset, length)

    def size(self, key: str) -> int:
        self.touched.append(key)
        return self.inner.size(key)

    def exists(self, key: str) -> bool:
        self.touched.append(key)
        return self.inner.exists(key)

    def delete(self, key: str) -> None:
        self.inner.delete(key)

    def list(
        self, prefix: str, start_after: str | None = None, limit: int | None = None
    ) -> list[str]:
        self.touched.append(prefix)
        return self.inner.list(prefix, start_after, limit)

    def list_stamped(self, prefix: str) -> StampedKeys:
        self.touched.append(prefix)
        return self.inner.list_stamped(prefix)

    def get(self, key: str) -> tuple[bytes, str] | None:
        self.touched.append(key)
        return self.inner.get(key)

    def put_if(self, key: str, data: bytes, expected_version: str | None) -> str:
        return self.inner.put_if(key, data, expected_version)

    def make_durable(self, key: str) -> None:
        self.inner.make_durable(key)

    def close(self) -> None:
        self.inner.close()
