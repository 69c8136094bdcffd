"""The blocking twin of :class:`~.event_writer.EventWriter`, for code without an event loop.

    with BlockingEventWriter("http://127.0.0.1:9090", writer_id="w1") as writer:
        offset = writer.write("scope/stream/0", b"event")       # durable when it returns
        pending = [writer.send("scope/stream/0", b"e%d" % i) for i in range(1000)]
        offsets = [f.result() for f in pending]                  # many in flight at once

It runs an :class:`~.async_client.AsyncSegmentStoreClient` and an ``EventWriter`` on an
event loop of its own, in one background thread, and hands calls over to it. ``write`` blocks
for one record's answer, so one thread's records go one by one (``linger_ms`` apart at worst);
``send`` returns a ``concurrent.futures.Future`` as soon as the record is buffered, so one
thread keeps many records in flight. The same batching, ordering, exactly-once and memory
bound apply; a thread hand-over per record costs tens of microseconds, far more than the
asyncio writer's own work, so a producer after the highest rates uses ``EventWriter``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from types import TracebackType
from typing import Any, TypeVar

from .async_client import AsyncSegmentStoreClient
from .event_writer import EventAck, EventWriter
from .retry import RetryPolicy
from .sync_client import DEFAULT_URL

T = TypeVar("T")


class BlockingEventWriter:
    """``base_url``, ``token``, ``timeout_s``, ``retry`` and ``verify`` are the client's;
    the rest are :class:`EventWriter`'s. Close it (or use ``with``) to flush and stop its
    thread."""

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        *,
        token: str | None = None,
        timeout_s: float = 30.0,
        retry: RetryPolicy | None = None,
        verify: bool | str = True,
        writer_id: str | None = None,
        batch_bytes: int = 1 << 20,
        linger_ms: float = 2.0,
        max_in_flight: int = 4,
        max_buffered_bytes: int = 64 << 20,
        delivery_timeout_s: float = 120.0,
    ) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="blocking-event-writer", daemon=True
        )
        self._thread.start()
        self._client = AsyncSegmentStoreClient(
            base_url, token=token, timeout_s=timeout_s, retry=retry, verify=verify
        )
        self._writer = EventWriter(
            self._client,
            writer_id=writer_id,
            batch_bytes=batch_bytes,
            max_in_flight=max_in_flight,
            linger_ms=linger_ms,
            max_buffered_bytes=max_buffered_bytes,
            delivery_timeout_s=delivery_timeout_s,
        )
        self.writer_id = self._writer.writer_id
        self._closed = False

    def _submit(self, work: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(work, self._loop)

    def write(self, segment: str, payload: bytes) -> int:
        """Appends one event; its offset once durable (errors as ``EventWriter.write``)."""
        return self._submit(self._writer.write(segment, payload)).result()

    def send(self, segment: str, payload: bytes) -> concurrent.futures.Future[int]:
        """Buffers one event (blocking only while the memory bound is reached); the future
        gives its offset or its batch's error."""
        return self._submit(self._send(segment, payload)).result()

    async def _send(self, segment: str, payload: bytes) -> concurrent.futures.Future[int]:
        ack = await self._writer.send(segment, payload)
        answer: concurrent.futures.Future[int] = concurrent.futures.Future()

        def settle(done: EventAck) -> None:
            try:
                answer.set_result(done.offset())
            except BaseException as error:  # the batch's error, for the caller's thread
                answer.set_exception(error)

        ack.add_done_callback(settle)
        return answer

    def flush(self) -> None:
        """Waits until every record given so far has its answer."""
        self._submit(self._writer.flush()).result()

    def close(self) -> None:
        """Flushes, closes the connections and stops the thread. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self._submit(self._shutdown()).result()
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()

    async def _shutdown(self) -> None:
        try:
            await self._writer.close()
        finally:
            await self._client.aclose()

    def __enter__(self) -> BlockingEventWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
