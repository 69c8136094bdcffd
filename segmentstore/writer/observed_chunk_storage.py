"""A Tier 2 location that reports how long each chunk write took and how large it was.

:class:`ObservedChunkStorage` wraps any :class:`~segmentstore.tier2.ChunkStorage` and changes
nothing of its contract. The Storage Writer's flushes write chunk bytes with ``create`` (a new
chunk, or every flush where the backend cannot append) and ``append``; each is reported to the
store's :class:`~segmentstore.observations.Observations` from the thread that made it. Reads,
listings and manifest updates pass through untimed.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from segmentstore.observations import Observations
from segmentstore.tier2 import ChunkStorage
from segmentstore.tier2.chunk_storage import Buffer, StampedKeys


def _size(parts: Sequence[Buffer]) -> int:
    return sum(memoryview(part).nbytes for part in parts)


class ObservedChunkStorage(ChunkStorage):
    def __init__(self, inner: ChunkStorage, observations: Observations) -> None:
        self.inner = inner
        self.uri = inner.uri
        self.supports_append = inner.supports_append
        self.concurrent_writes = inner.concurrent_writes
        self._observations = observations

    def create(self, key: str, parts: Sequence[Buffer]) -> None:
        started = time.perf_counter()
        self.inner.create(key, parts)
        self._observations.tier2_written(time.perf_counter() - started, _size(parts))

    def append(self, key: str, offset: int, parts: Sequence[Buffer]) -> None:
        started = time.perf_counter()
        self.inner.append(key, offset, parts)
        self._observations.tier2_written(time.perf_counter() - started, _size(parts))

    def read(self, key: str, offset: int, length: int) -> bytes:
        return self.inner.read(key, offset, length)

    def size(self, key: str) -> int:
        return self.inner.size(key)

    def exists(self, key: str) -> bool:
        return self.inner.exists(key)

    def delete(self, key: str) -> None:
        self.inner.delete(key)

    def list(
        self, prefix: str, start_after: str | None = None, limit: int | None = None
    ) -> list[str]:
        return self.inner.list(prefix, start_after, limit)

    def list_stamped(self, prefix: str) -> StampedKeys:
        return self.inner.list_stamped(prefix)

    def get(self, key: str) -> tuple[bytes, str] | None:
        return self.inner.get(key)

    def put_if(self, key: str, data: bytes, expected_version: str | None) -> str:
        return self.inner.put_if(key, data, expected_version)

    def make_durable(self, key: str) -> None:
        self.inner.make_durable(key)

    def close(self) -> None:
        self.inner.close()
