"""A ``ChunkStorage`` that wraps a real one and injects the faults a FaultInjector decides
(Pravega's ``TestStorage`` with an ``ErrorInjector``). Every method of the contract is a method
to the injector (``create``, ``append``, ``read``, ``size``, ``exists``, ``delete``, ``list``,
``get``, ``put_if``):

``fail``
    raises before the real call: ``Tier2UnavailableError`` (an outage, retried by callers)
    unless the fault names another error;
``fail_after``
    the real call happens, then raises: a write that landed but whose answer was lost;
``partial``
    ``append`` and ``create`` write the first half of their bytes, then raise (for ``create``
    the object is then there, short: a backend that cannot create atomically after a crash);
``delay``
    sleeps ``delay_s`` first (the calls are blocking: they run in worker threads);
``corrupt``
    ``read`` and ``get`` return their bytes with one changed.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from fault_injection import Fault, FaultInjector, corrupted

from segmentstore.tier2 import ChunkStorage, Tier2UnavailableError
from segmentstore.tier2.chunk_storage import Buffer, StampedKeys


class FlakyChunkStorage(ChunkStorage):
    def __init__(self, inner: ChunkStorage, injector: FaultInjector) -> None:
        self.inner = inner
        self.injector = injector
        self.uri = inner.uri
        self.supports_append = inner.supports_append
        self.concurrent_writes = inner.concurrent_writes

    def _error(self, fault: Fault) -> BaseException:
        if fault.error is not None:
            return fault.error()
        return Tier2UnavailableError(self.uri, f"injected: {fault.method} call fails")

    def _before(self, method: str) -> Fault | None:
        fault = self.injector.decide(method)
        if fault is None:
            return None
        if fault.action == "delay":
            time.sleep(fault.delay_s)
            return None
        if fault.action == "fail":
            raise self._error(fault)
        return fault

    def _after(self, fault: Fault | None) -> None:
        if fault is not None and fault.action == "fail_after":
            raise self._error(fault)

    def create(self, key: str, parts: Sequence[Buffer]) -> None:
        fault = self._before("create")
        if fault is not None and fault.action == "partial":
            data = b"".join(bytes(p) for p in parts)
            self.inner.create(key, [data[: len(data) // 2]])
            raise self._error(fault)
        self.inner.create(key, parts)
        self._after(fault)

    def append(self, key: str, offset: int, parts: Sequence[Buffer]) -> None:
        fault = self._before("append")
        if fault is not None and fault.action == "partial":
            data = b"".join(bytes(p) for p in parts)
            self.inner.append(key, offset, [data[: len(data) // 2]])
            raise self._error(fault)
        self.inner.append(key, offset, parts)
        self._after(fault)

    def read(self, key: str, offset: int, length: int) -> bytes:
        fault = self._before("read")
        data = self.inner.read(key, offset, length)
        self._after(fault)
        return corrupted(data) if fault is not None and fault.action == "corrupt" else data

    def size(self, key: str) -> int:
        fault = self._before("size")
        size = self.inner.size(key)
        self._after(fault)
        return size

    def exists(self, key: str) -> bool:
        fault = self._before("exists")
        found = self.inner.exists(key)
        self._after(fault)
        return found

    def delete(self, key: str) -> None:
        fault = self._before("delete")
        self.inner.delete(key)
        self._after(fault)

    def list(
        self, prefix: str, start_after: str | None = None, limit: int | None = None
    ) -> list[str]:
        fault = self._before("list")
        keys = self.inner.list(prefix, start_after, limit)
        self._after(fault)
        return keys

    def list_stamped(self, prefix: str) -> StampedKeys:
        fault = self._before("list")
        keys = self.inner.list_stamped(prefix)
        self._after(fault)
        return keys

    def get(self, key: str) -> tuple[bytes, str] | None:
        fault = self._before("get")
        found = self.inner.get(key)
        self._after(fault)
        if found is not None and fault is not None and fault.action == "corrupt":
            return corrupted(found[0]), found[1]
        return found

    def put_if(self, key: str, data: bytes, expected_version: str | None) -> str:
        fault = self._before("put_if")
        version = self.inner.put_if(key, data, expected_version)
        self._after(fault)
        return version

    def make_durable(self, key: str) -> None:
        fault = self._before("make_durable")
        self.inner.make_durable(key)
        self._after(fault)

    def close(self) -> None:
        self.inner.close()
