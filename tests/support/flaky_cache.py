"""A ``Cache`` that wraps a real one and injects the faults a FaultInjector decides: ``insert``
and ``append`` ``fail`` with ``CacheFullError`` before reaching the real cache (which the
contract allows whenever the blocks do not fit); ``read`` may ``corrupt`` what it returns.
Everything else passes through."""

from __future__ import annotations

from fault_injection import FaultInjector, corrupted

from segmentstore.cache import Cache, CacheFullError, CacheStats
from segmentstore.cache.cache import Buffer


class FlakyCache(Cache):
    def __init__(self, inner: Cache, injector: FaultInjector) -> None:
        self.inner = inner
        self.injector = injector

    def _refuses(self, method: str) -> bool:
        fault = self.injector.decide(method)
        return fault is not None and fault.action == "fail"

    @property
    def block_bytes(self) -> int:
        return self.inner.block_bytes

    @property
    def max_bytes(self) -> int:
        return self.inner.max_bytes

    def insert(self, data: Buffer) -> int:
        if self._refuses("insert"):
            raise self._full(data)
        return self.inner.insert(data)

    def append(self, address: int, data: Buffer) -> int:
        if self._refuses("append"):
            raise self._full(data)
        return self.inner.append(address, data)

    def _full(self, data: Buffer) -> CacheFullError:
        return CacheFullError(len(data), self.inner.used_bytes, self.inner.max_bytes)

    def read(self, address: int, offset: int, length: int) -> bytes:
        fault = self.injector.decide("read")
        data = self.inner.read(address, offset, length)
        return corrupted(data) if fault is not None and fault.action == "corrupt" else data

    def view(self, address: int, offset: int, length: int) -> list[memoryview]:
        return self.inner.view(address, offset, length)

    def length(self, address: int) -> int:
        return self.inner.length(address)

    def delete(self, address: int) -> None:
        self.inner.delete(address)

    def evict(self, address: int) -> None:
        self.inner.evict(address)

    @property
    def used_bytes(self) -> int:
        return self.inner.used_bytes

    @property
    def stats(self) -> CacheStats:
        return self.inner.stats

    def close(self) -> None:
        self.inner.close()
