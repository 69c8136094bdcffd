"""A batching, exactly-once event writer over ``:appendEvents``, in the spirit of Pravega's
``EventStreamWriter`` and Kafka's producer.

``await writer.write(segment, payload)`` returns the offset of the event's header in the
segment once the store has it durably. Underneath, each segment has a *lane*
(:mod:`segmentstore.client.batch_lane`):

- Records join the lane's open batch (framed as the store's events: an 8-byte header, then the
  payload). A batch is sent when it reaches ``batch_bytes``; at the end of the loop iteration
  in which it got its first records, if nothing of its lane is on the wire; else once it has
  waited ``linger_ms`` and the lane has room, or as soon as the lane's requests are all
  answered. So an idle segment sends at once, and a busy one sends fuller batches.
- Up to ``max_in_flight`` batches per segment are on the wire at once, and segments are
  written in parallel. Every batch carries ``Writer-Id`` and a ``Writer-Seq`` that only grows
  (it starts from the clock in microseconds, so a writer restarted with the same id still goes
  above what its previous life sent); every batch of a lane after the first also carries
  ``Writer-Prev-Seq``, the number of the batch before it. The store applies a batch only right
  after that one and refuses it otherwise (``writer_seq_mismatch``): batches cannot land out
  of order, whatever connection each takes. The order of a segment's records is the order of
  ``write`` calls.
- After any failure (a dropped connection, a server killed and restarted, ``503`` while a
  container recovers, a batch that overtook its predecessor) the lane waits for the batches
  behind the failed one and sends again from the first one not acknowledged, with the same
  sequence numbers, until ``delivery_timeout_s``: one applied before answers ``duplicate``
  and appends nothing, and the writer finds where it went (see ``batch_lane``). So
  exactly-once and order hold through lost answers, restarts and failovers.
- A batch the store refuses (the segment is sealed or missing, an event too large) or one that
  runs out of ``delivery_timeout_s`` fails exactly its own records: their ``write`` calls
  raise the error; the lane goes on with the next batch, chained on the last one applied.
- Memory is bounded: once ``max_buffered_bytes`` of records are unacknowledged, ``write``
  waits until answers free room (back-pressure, not growth). A single record larger than the
  bound is still taken when nothing else is buffered.
- :meth:`flush` waits until every record written before it is answered; :meth:`close` flushes
  and refuses further writes.

If someone else appends to a segment between a batch and its lost answer, the records of that
batch fail with :class:`UnknownOffsetError`: their data is in the segment exactly once, but
where is unknown.

Cancelling a ``write`` that is waiting for its answer does not take the record back: it was
already in a batch, and the batch is shared with other writers' records.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Generator
from struct import Struct
from types import TracebackType
from typing import TYPE_CHECKING, Any

from .batch_lane import Batch, BatchFuture, Lane, UnknownOffsetError, WriterClosedError

if TYPE_CHECKING:
    from .async_client import AsyncSegmentStoreClient

__all__ = ["EventAck", "EventWriter", "UnknownOffsetError", "WriterClosedError"]

_HEADER = Struct(">ii")
_HEADER_BYTES = _HEADER.size


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


class EventWriter:
    """Writes events to any number of segments through one
    :class:`~segmentstore.client.AsyncSegmentStoreClient`; see the module docstring.

    ``writer_id`` names this writer for exactly-once (a fresh one per writer by default; reuse
    one only for the same logical producer). ``batch_bytes`` caps a request's body (events
    and their headers; below the store's ``max_append_bytes``), ``linger_ms`` is how long a
    batch waits for more records while its segment has requests on the wire,
    ``max_in_flight`` how many batches of one segment may be on the wire at once (1 sends
    each batch only after the previous one is answered), ``max_buffered_bytes`` bounds what
    is held unacknowledged, ``delivery_timeout_s`` how long a batch is retried through lost
    answers and recovering containers before its records fail.
    """

    def __init__(
        self,
        client: AsyncSegmentStoreClient,
        *,
        writer_id: str | None = None,
        batch_bytes: int = 1 << 20,
        linger_ms: float = 2.0,
        max_in_flight: int = 4,
        max_buffered_bytes: int = 64 << 20,
        delivery_timeout_s: float = 120.0,
    ) -> None:
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1, got {max_in_flight}")
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
        self._max_in_flight = max_in_flight
        self._lanes: dict[str, Lane] = {}
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

    def _enqueue(self, segment: str, payload: bytes) -> tuple[BatchFuture, int]:
        """Adds the record to its lane's open batch: the batch's answer and where in the batch
        the record starts."""
        size = _HEADER_BYTES + len(payload)
        lane = self._lanes.get(segment)
        if lane is None:
            lane = self._lanes[segment] = self._lane(segment)
        batch = lane.open
        if batch is None or (batch.size + size > self._batch_bytes and batch.count):
            if batch is not None:
                self._seal(lane)
            batch = lane.open = Batch(self._loop())
            if not lane.busy:
                # Nothing of this segment on the wire: it goes once this loop iteration's
                # records have joined it.
                self._loop().call_soon(self._consider, lane)
            elif lane.timer is None:
                lane.timer = self._loop().call_later(self._linger_s, self._lingered, lane)
        position = batch.size
        batch.parts += (_HEADER.pack(0, len(payload)), payload)
        batch.size += size
        batch.count += 1
        self._buffered += size
        if batch.size >= self._batch_bytes:
            self._seal(lane)
        return batch.future, position

    def _lane(self, segment: str) -> Lane:
        def next_seq() -> int:
            self._next_seq += 1
            return self._next_seq

        def settle(batch: Batch, outcome: int | BaseException) -> None:
            self._settle(lane, batch, outcome)

        lane = Lane(
            segment,
            self._client,
            self.writer_id,
            self._max_in_flight,
            self._delivery_timeout_s,
            next_seq,
            settle,
        )
        return lane

    def _loop(self) -> asyncio.AbstractEventLoop:
        loop = self._event_loop
        if loop is None:
            loop = self._event_loop = asyncio.get_running_loop()
        return loop

    async def flush(self) -> None:
        """Sends every open batch now and waits until every record written so far has its
        answer (an offset or an error: ``flush`` itself does not raise them)."""
        pending: list[BatchFuture] = []
        for lane in self._lanes.values():
            self._seal(lane)
            pending += lane.pending()
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

    def _consider(self, lane: Lane) -> None:
        """Sends the lane's open batch if it is time: at once if nothing of the segment is on
        the wire; once it has waited ``linger_ms`` if the lane has room; else the lane's next
        answer considers it again."""
        batch = lane.open
        if batch is None:
            return
        if not lane.busy:
            self._seal(lane)
            return
        if not lane.has_room:
            return
        wait_s = batch.opened + self._linger_s - self._loop().time()
        if wait_s <= 0:
            self._seal(lane)
        elif lane.timer is None:
            lane.timer = self._loop().call_later(wait_s, self._lingered, lane)

    def _lingered(self, lane: Lane) -> None:
        lane.timer = None
        self._consider(lane)

    def _seal(self, lane: Lane) -> None:
        """Queues the lane's open batch for sending and sends what the lane has room for."""
        batch = lane.open
        if batch is None:
            return
        lane.open = None
        if lane.timer is not None:
            lane.timer.cancel()
            lane.timer = None
        lane.queue.append(batch)
        lane.start()

    def _settle(self, lane: Lane, batch: Batch, outcome: int | BaseException) -> None:
        self._buffered -= batch.size
        self._room.set()
        if isinstance(outcome, BaseException):
            batch.future.set_exception(outcome)
        else:
            batch.future.set_result(outcome)
        self._consider(lane)
