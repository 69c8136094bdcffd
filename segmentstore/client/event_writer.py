"""A batching, exactly-once event writer over ``:appendEvents``, in the spirit of Pravega's
``EventStreamWriter`` and Kafka's producer.

``await writer.write(segment, payload)`` returns the offset of the event's header in the
segment once the store has it durably. Underneath, each segment has a *lane*:

- Records join the lane's open batch (framed as the store's events: an 8-byte header, then the
  payload). A batch is sent when it reaches ``batch_bytes``, or ``linger_ms`` after its first
  record, or at once when the previous request of the lane is answered and records wait.
- One request per lane is on the wire at a time, and the next batch fills while it is. The
  order of a segment's records is the order of ``write`` calls, and it is what keeps
  exactly-once exact: the store drops a batch whose ``Writer-Seq`` is not above the highest it
  applied for this writer, so two batches of one lane racing on two connections could make
  the later one drop the earlier. Segments are written in parallel, one request each.
- Every batch carries ``Writer-Id`` and a ``Writer-Seq`` that only grows (it starts from the
  clock in microseconds, so a writer restarted with the same id still goes above what its
  previous life sent). A batch whose answer was lost (a dropped connection, a server killed
  and restarted, ``503`` while a container recovers) is sent again with the same sequence
  number until ``delivery_timeout_s``: if the first one was applied the store answers
  ``duplicate`` and appends nothing, and the writer finds where it went (below).
- A batch the store refuses (the segment is sealed or missing, an event too large) or one that
  runs out of ``delivery_timeout_s`` fails exactly its own records: their ``write`` calls
  raise the error; the lane goes on with the next batch.
- Memory is bounded: once ``max_buffered_bytes`` of records are unacknowledged, ``write``
  waits until answers free room (back-pressure, not growth). A single record larger than the
  bound is still taken when nothing else is buffered.
- :meth:`flush` waits until every record written before it is answered; :meth:`close` flushes
  and refuses further writes.

Where a duplicate's batch went: the store answers a duplicate with the segment's current length
but no offset. If the lane's batch is the last thing in the segment (one writer per segment,
the usual case) its bytes end there; the writer reads them back to check, and gives the records
their offsets. If someone else appended after it, the records fail with
:class:`UnknownOffsetError`: their data is in the segment exactly once, but where is unknown.

Cancelling a ``write`` that is waiting for its answer does not take the record back: it was
already in a batch, and the batch is shared with other writers' records.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import deque
from collections.abc import Callable, Generator
from struct import Struct
from types import TracebackType
from typing import TYPE_CHECKING, Any

import httpx

from segmentstore.contracts.errors import SegmentStoreError

if TYPE_CHECKING:
    from .async_client import AsyncSegmentStoreClient

_HEADER = Struct(">ii")
_HEADER_BYTES = _HEADER.size
# Errors after which the same batch, sent again with its sequence number, may succeed.
_RETRYABLE_CODES = frozenset({"container_unavailable", "throttled"})


# Neither is a SegmentStoreError: those are the store's answers, each mapped to HTTP; these
# two are the writer's own outcomes and never cross the wire.
class UnknownOffsetError(Exception):
    """A batch was applied exactly once, but its offset could not be learnt (another writer
    appended to the segment behind it before its lost answer was replaced)."""


class WriterClosedError(RuntimeError):
    """``write`` after :meth:`EventWriter.close`, or its sender was cancelled."""


class _BatchFuture(asyncio.Future[int]):
    """The shared answer of one batch: the offset where it starts.

    Every ``write`` of the batch awaits it; a cancelled waiter must not cancel it for the
    others (asyncio's Task cancels the future it waits on), so it refuses cancellation.
    """

    def cancel(self, msg: object = None) -> bool:
        return False


class EventAck:
    """The pending answer of one record given to :meth:`EventWriter.send`: ``await`` it for
    the record's offset (or its batch's error)."""

    __slots__ = ("_future", "_position")

    def __init__(self, future: asyncio.Future[int], position: int) -> None:
        self._future = future
        self._position = position

    def __await__(self) -> Generator[Any, None, int]:
        offset = yield from self._future.__await__()
        return offset + self._position

    def done(self) -> bool:
        return self._future.done()

    def offset(self) -> int:
        """The offset of a record whose batch is answered (raises the batch's error)."""
        return self._future.result() + self._position

    def add_done_callback(self, callback: Callable[[EventAck], None]) -> None:
        """Calls ``callback(self)`` on the writer's loop once the batch is answered."""
        self._future.add_done_callback(lambda _: callback(self))


class _Batch:
    __slots__ = ("count", "future", "parts", "seq", "size")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.parts: list[bytes] = []
        self.size = 0
        self.count = 0
        self.seq = -1
        self.future: _BatchFuture = _BatchFuture(loop=loop)


class _Lane:
    """One segment's batches: the open one, the sealed ones waiting, and its sender task."""

    __slots__ = ("open", "segment", "sender", "timer", "waiting")

    def __init__(self, segment: str) -> None:
        self.segment = segment
        self.open: _Batch | None = None
        self.waiting: deque[_Batch] = deque()
        self.sender: asyncio.Task[None] | None = None
        self.timer: asyncio.TimerHandle | None = None


class EventWriter:
    """Writes events to any number of segments through one
    :class:`~segmentstore.client.AsyncSegmentStoreClient`; see the module docstring.

    ``writer_id`` names this writer for exactly-once (a fresh one per writer by default; reuse
    one only for the same logical producer). ``batch_bytes`` caps a request's body (events
    and their headers; below the store's ``max_append_bytes``), ``linger_ms`` is how long a
    batch waits for more records, ``max_buffered_bytes`` bounds what is held unacknowledged,
    ``delivery_timeout_s`` how long a batch is retried through lost answers and recovering
    containers before its records fail.
    """

    def __init__(
        self,
        client: AsyncSegmentStoreClient,
        *,
        writer_id: str | None = None,
        batch_bytes: int = 1 << 20,
        linger_ms: float = 2.0,
        max_buffered_bytes: int = 64 << 20,
        delivery_timeout_s: float = 120.0,
    ) -> None:
        if batch_bytes <= _HEADER_BYTES:
            raise ValueError(f"batch_bytes must exceed {_HEADER_BYTES}, got {batch_bytes}")
        if max_buffered_bytes < batch_bytes:
            raise ValueError("max_buffered_bytes must be at least batch_bytes")
        self._client = client
        self.writer_id = writer_id or uuid.uuid4().hex
        self._batch_bytes = batch_bytes
        self._linger_s = max(0.0, linger_ms) / 1000
        self._max_buffered = max_buffered_bytes
        self._delivery_timeout_s = delivery_timeout_s
        self._lanes: dict[str, _Lane] = {}
        self._buffered = 0
        self._room = asyncio.Event()
        self._closed = False
        self._event_loop: asyncio.AbstractEventLoop | None = None
        # Above anything an earlier life of the same writer id can have sent (see above).
        self._next_seq = time.time_ns() // 1000

    async def __aenter__(self) -> EventWriter:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    @property
    def buffered_bytes(self) -> int:
        """Bytes of records (with their headers) written and not yet answered."""
        return self._buffered

    async def write(self, segment: str, payload: bytes) -> int:
        """Appends one event; returns the offset of its header once durable in the store.

        Raises the store's error for the batch it was in (``SegmentSealedError``, ...),
        ``httpx.TransportError`` if the store could not be reached within
        ``delivery_timeout_s``, or :class:`WriterClosedError` after :meth:`close`.
        """
        if self._closed or self._buffered + len(payload) + _HEADER_BYTES > self._max_buffered:
            await self._wait_for_room(len(payload) + _HEADER_BYTES)
        future, position = self._enqueue(segment, payload)
        return await future + position

    async def send(self, segment: str, payload: bytes) -> EventAck:
        """Like :meth:`write`, but returns once the record is buffered (waiting only for room,
        the back-pressure): await the :class:`EventAck` for its offset. One producer can so
        keep many records in flight without a task per record, as with Kafka's ``send``."""
        if self._closed or self._buffered + len(payload) + _HEADER_BYTES > self._max_buffered:
            await self._wait_for_room(len(payload) + _HEADER_BYTES)
        return EventAck(*self._enqueue(segment, payload))

    async def _wait_for_room(self, size: int) -> None:
        while True:
            if self._closed:
                raise WriterClosedError("the event writer is closed")
            # A record larger than the whole bound still goes when nothing else is held.
            if not self._buffered or self._buffered + size <= self._max_buffered:
                return
            self._room.clear()
            await self._room.wait()

    def _enqueue(self, segment: str, payload: bytes) -> tuple[_BatchFuture, int]:
        """Adds the record to its lane's open batch: the batch's answer and where in the batch
        the record starts."""
        size = _HEADER_BYTES + len(payload)
        lane = self._lanes.get(segment)
        if lane is None:
            lane = self._lanes[segment] = _Lane(segment)
        batch = lane.open
        if batch is None or (batch.size + size > self._batch_bytes and batch.count):
            if batch is not None:
                self._seal(lane)
            batch = lane.open = _Batch(self._loop())
        position = batch.size
        batch.parts += (_HEADER.pack(0, len(payload)), payload)
        batch.size += size
        batch.count += 1
        self._buffered += size
        if batch.size >= self._batch_bytes:
            self._seal(lane)
        elif lane.sender is None and lane.timer is None:
            lane.timer = self._loop().call_later(self._linger_s, self._lingered, lane)
        return batch.future, position

    def _loop(self) -> asyncio.AbstractEventLoop:
        loop = self._event_loop
        if loop is None:
            loop = self._event_loop = asyncio.get_running_loop()
        return loop

    async def flush(self) -> None:
        """Sends every open batch now and waits until every record written so far has its
        answer (an offset or an error: ``flush`` itself does not raise them)."""
        pending: list[_BatchFuture] = []
        for lane in self._lanes.values():
            if lane.open is not None:
                self._seal(lane)
            # The head of ``waiting`` is the batch on the wire; it stays there until answered.
            pending += (batch.future for batch in lane.waiting)
        if pending:
            await asyncio.wait(pending)

    async def close(self) -> None:
        """Flushes, then refuses further writes. Idempotent."""
        if self._closed:
            return
        await self.flush()
        self._closed = True
        self._room.set()

    # -- sending ----------------------------------------------------------------------------

    def _lingered(self, lane: _Lane) -> None:
        lane.timer = None
        if lane.open is not None and lane.sender is None:
            self._seal(lane)

    def _seal(self, lane: _Lane) -> None:
        """Queues the lane's open batch for sending and makes sure a sender runs."""
        batch = lane.open
        if batch is None:
            return
        lane.open = None
        lane.waiting.append(batch)
        if lane.timer is not None:
            lane.timer.cancel()
            lane.timer = None
        if lane.sender is None:
            lane.sender = self._loop().create_task(
                self._send_lane(lane), name=f"event-writer:{lane.segment}"
            )
            lane.sender.add_done_callback(lambda task: self._sender_done(lane, task))

    def _sender_done(self, lane: _Lane, task: asyncio.Task[None]) -> None:
        # A sender settles every batch itself; one that was cancelled (the loop is closing)
        # or died leaves batches behind, and their records fail rather than wait forever.
        failure: BaseException | None = None
        if task.cancelled():
            failure = WriterClosedError("the event writer's sender was cancelled")
        elif task.exception() is not None:
            failure = task.exception()
        while failure is not None and lane.waiting:
            self._settle(lane.waiting.popleft(), failure)

    async def _send_lane(self, lane: _Lane) -> None:
        try:
            while lane.waiting:
                batch = lane.waiting[0]
                try:
                    offset: int | BaseException = await self._deliver(lane.segment, batch)
                except Exception as error:  # whatever it is, it is this batch's outcome
                    offset = error
                lane.waiting.popleft()
                self._settle(batch, offset)
                if not lane.waiting and lane.open is not None:
                    # What arrived while the request was out has lingered long enough.
                    batch = lane.open
                    lane.open = None
                    lane.waiting.append(batch)
                    if lane.timer is not None:
                        lane.timer.cancel()
                        lane.timer = None
        finally:
            # In the same step as the last check of ``waiting``: a write after this point
            # sees no sender and starts one.
            lane.sender = None

    def _settle(self, batch: _Batch, outcome: int | BaseException) -> None:
        self._buffered -= batch.size
        self._room.set()
        if isinstance(outcome, BaseException):
            batch.future.set_exception(outcome)
        else:
            batch.future.set_result(outcome)

    async def _deliver(self, segment: str, batch: _Batch) -> int:
        """Sends ``batch`` until it is applied or refused; the offset where it starts."""
        if batch.seq < 0:
            batch.seq = self._next_seq
            self._next_seq += 1
        body = b"".join(batch.parts)
        batch.parts = [body]
        deadline = time.monotonic() + self._delivery_timeout_s
        backoff_s = 0.05
        while True:
            try:
                result = await self._client.append_events(
                    segment, body, writer_id=self.writer_id, writer_seq=batch.seq
                )
            except (SegmentStoreError, httpx.TransportError) as error:
                retryable = isinstance(error, httpx.TransportError) or (
                    error.code in _RETRYABLE_CODES
                )
                if not retryable or time.monotonic() + backoff_s > deadline:
                    raise
                await asyncio.sleep(backoff_s)
                backoff_s = min(1.0, backoff_s * 2)
                continue
            if not result.duplicate:
                assert result.offset is not None
                return result.offset
            return await self._locate(segment, body, result.length)

    async def _locate(self, segment: str, body: bytes, length: int) -> int:
        """Where an applied batch whose answer was lost starts, if it ends the segment."""
        start = length - len(body)
        if start >= 0:
            found = await self._client.read(segment, start, len(body))
            if found.data == body:
                return start
        raise UnknownOffsetError(
            f"a batch of {len(body)} bytes to {segment!r} was applied once, but other appends"
            " followed it before its answer could be replaced: its offset is unknown"
        )
