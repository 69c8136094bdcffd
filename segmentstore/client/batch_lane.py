"""One segment's batches in an :class:`~segmentstore.client.EventWriter`: chained and pipelined.

A lane sends its batches in order, each a ``:appendEvents`` request with the writer's
``Writer-Id``, its own ``Writer-Seq`` and, from the second on, ``Writer-Prev-Seq``: the
sequence number of the batch sent before it. The store applies a chained batch only right
after its predecessor (docs/api.md, Exactly-once appends), so up to ``window`` batches can be
on the wire at once, on any connections, and still none lands out of order or twice:

- a batch that overtakes its predecessor on the way is refused (``412
  writer_seq_mismatch``) and sent again once the predecessor is in;
- after any failure of the batch at the head of the lane (``503``, a lost answer, a refusal)
  every batch behind it is waited for and the lane sends again from the first one not
  acknowledged, chained on the last one that is. One that had been applied answers
  ``duplicate``; one that had not is applied now. Nothing is applied twice, nothing skipped.

Where a duplicate went: the store answers it with the segment's length but no offset. The
batches of a lane lie back to back in the segment when no one else writes to it, so a run of
duplicates ends where the next batch of the lane starts (its answer says where), or at the
segment's length if nothing of the lane followed; the lane reads the bytes there back to check
and gives the records their offsets. If someone else appended in between, the records fail
with :class:`UnknownOffsetError`: their data is in the segment exactly once, where is unknown.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

import httpx

from segmentstore.errors import SegmentStoreError, WriterSeqMismatchError
from segmentstore.segment_info import AppendResult

if TYPE_CHECKING:
    from .async_client import AsyncSegmentStoreClient

# Errors after which the same batch, sent again with its sequence number, may succeed.
RETRYABLE_CODES = frozenset({"container_unavailable", "throttled"})
_FIRST_BACKOFF_S = 0.05
_MAX_BACKOFF_S = 1.0


# Neither is a SegmentStoreError: those are the store's answers, each mapped to HTTP; these
# two are the writer's own outcomes and never cross the wire.
class UnknownOffsetError(Exception):
    """A batch was applied exactly once, but its offset could not be learnt (another writer
    appended to the segment behind it before its lost answer was replaced)."""


class WriterClosedError(RuntimeError):
    """``write`` after :meth:`EventWriter.close`, or its sender was cancelled."""


class BatchFuture(asyncio.Future[int]):
    """The shared answer of one batch: the offset where it starts.

    Every ``write`` of the batch awaits it; a cancelled waiter must not cancel it for the
    others (asyncio's Task cancels the future it waits on), so it refuses cancellation.
    """

    def cancel(self, msg: object = None) -> bool:
        return False


class Batch:
    __slots__ = (
        "body", "count", "deadline", "future", "known", "opened", "parts", "prev", "reorders",
        "seq", "size",
    )  # fmt: skip

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.parts: list[bytes] = []
        self.body = b""  # the parts joined, once the batch is first sent
        self.size = 0
        self.count = 0
        self.opened = loop.time()
        self.seq = -1  # given when first sent
        self.prev: int | None = None  # the batch it is chained on, as last sent
        self.deadline = 0.0
        self.known: AppendResult | None = None  # applied: an answer from an earlier round
        self.reorders = 0  # times sent again at once after overtaking its predecessor
        self.future: BatchFuture = BatchFuture(loop=loop)


Outcome = AppendResult | BaseException


class Lane:
    """The batches of one segment: ``open`` fills; ``queue`` waits to be sent; ``flight``
    is on the wire (or answered and not yet settled), oldest first."""

    def __init__(
        self,
        segment: str,
        client: AsyncSegmentStoreClient,
        writer_id: str,
        window: int,
        delivery_timeout_s: float,
        next_seq: Callable[[], int],
        settle: Callable[[Batch, int | BaseException], None],
    ) -> None:
        self.segment = segment
        self.open: Batch | None = None
        self.queue: deque[Batch] = deque()
        self.flight: deque[tuple[Batch, asyncio.Future[Outcome]]] = deque()
        self.sender: asyncio.Task[None] | None = None
        self.timer: asyncio.TimerHandle | None = None
        self._client = client
        self._writer_id = writer_id
        self._window = window
        self._timeout_s = delivery_timeout_s
        self._next_seq = next_seq
        self._settle = settle
        # The last batch known applied, and the last one sent after it: what the next one
        # sent is chained on. None: nothing yet, the next one goes unchained.
        self._acked: int | None = None
        self._chain: int | None = None
        self._backoff_s = _FIRST_BACKOFF_S
        self._recovering = False  # nothing new is sent until the failed head is resolved

    @property
    def busy(self) -> bool:
        """Batches sealed and not yet settled."""
        return bool(self.queue or self.flight)

    @property
    def has_room(self) -> bool:
        return len(self.flight) + len(self.queue) < self._window

    def pending(self) -> list[BatchFuture]:
        return [b.future for b in self.queue] + [b.future for b, _ in self.flight]

    # -- sending ----------------------------------------------------------------------------

    def start(self) -> None:
        """Sends what the window has room for, and makes sure a sender settles the answers."""
        self._fill()
        if self.sender is None and self.flight:
            loop = asyncio.get_running_loop()
            self.sender = loop.create_task(self._run(), name=f"event-writer:{self.segment}")
            self.sender.add_done_callback(self._sender_done)

    def _fill(self) -> None:
        if self._recovering:
            return
        loop = asyncio.get_running_loop()
        while self.queue and len(self.flight) < self._window:
            batch = self.queue.popleft()
            if batch.seq < 0:
                batch.seq = self._next_seq()
                batch.deadline = time.monotonic() + self._timeout_s
                batch.body = b"".join(batch.parts)
                batch.parts = []
            batch.prev = self._chain
            self._chain = batch.seq
            self.flight.append((batch, loop.create_task(self._attempt(batch))))

    async def _attempt(self, batch: Batch) -> Outcome:
        if batch.known is not None:
            return batch.known
        try:
            return await self._client.append_events(
                self.segment,
                batch.body,
                writer_id=self._writer_id,
                writer_seq=batch.seq,
                writer_prev_seq=batch.prev,
            )
        except Exception as error:  # whatever it is, it is this attempt's outcome
            return error

    async def _run(self) -> None:
        while self.flight:
            batch, attempt = self.flight[0]
            outcome = await attempt
            if isinstance(outcome, AppendResult) and not outcome.duplicate:
                assert outcome.offset is not None
                self._acknowledge(batch, outcome.offset)
                self._backoff_s = _FIRST_BACKOFF_S
            elif isinstance(outcome, AppendResult):
                await self._settle_duplicates()
            else:
                await self._recover(batch, outcome)
            self._fill()

    def _sender_done(self, task: asyncio.Task[None]) -> None:
        self.sender = None
        # A sender settles every batch itself; one that was cancelled (the loop is closing)
        # or died leaves batches behind, and their records fail rather than wait forever.
        failure: BaseException | None = None
        if task.cancelled():
            failure = WriterClosedError("the event writer's sender was cancelled")
        elif task.exception() is not None:
            failure = task.exception()
        if failure is None:
            if self.busy:
                self.start()  # sealed after the last answer
            return
        while self.flight:
            batch, attempt = self.flight.popleft()
            attempt.cancel()
            self._settle(batch, failure)
        while self.queue:
            self._settle(self.queue.popleft(), failure)

    def _acknowledge(
        self, batch: Batch, outcome: int | BaseException, applied: bool | None = None
    ) -> None:
        """Settles the head; ``applied`` (by default: whether ``outcome`` is an offset) moves
        the chain on to it."""
        self.flight.popleft()
        if applied if applied is not None else not isinstance(outcome, BaseException):
            self._acked = batch.seq
        self._settle(batch, outcome)

    # -- duplicates -------------------------------------------------------------------------

    async def _settle_duplicates(self) -> None:
        """The head answered ``duplicate``: it and the duplicates right behind it were applied
        before; find where they lie, from what follows them."""
        run: list[Batch] = []
        end: int | None = None
        length = 0
        for batch, attempt in list(self.flight):
            outcome = await attempt
            if isinstance(outcome, AppendResult) and outcome.duplicate:
                run.append(batch)
                length = outcome.length
                continue
            if isinstance(outcome, AppendResult):
                end = outcome.offset  # the next batch of the lane starts where they end
            break
        offsets = await self._locate(run, length if end is None else end)
        for batch in run:
            self._acknowledge(batch, offsets.pop(0), applied=True)

    async def _locate(self, run: list[Batch], end: int) -> list[int | BaseException]:
        size = sum(len(b.body) for b in run)
        start = end - size
        if start >= 0:
            try:
                found = b""
                while len(found) < size:  # a read may answer fewer bytes than asked
                    more = await self._client.read(
                        self.segment, start + len(found), size - len(found)
                    )
                    if not more.data:
                        break
                    found += bytes(more.data)
                if found == b"".join(b.body for b in run):
                    offsets: list[int | BaseException] = []
                    for batch in run:
                        offsets.append(start)
                        start += len(batch.body)
                    return offsets
            except (SegmentStoreError, httpx.TransportError):
                pass
        unknown = UnknownOffsetError(
            f"{len(run)} batch(es) of {size} bytes to {self.segment!r} were applied once, but"
            " other appends followed before their answers could be replaced: offset unknown"
        )
        return [unknown] * len(run)

    # -- failures ---------------------------------------------------------------------------

    async def _recover(self, head: Batch, error: BaseException) -> None:
        """The head failed: wait for every batch behind it, keep what they proved applied,
        and send again from the head (or fail it, if the failure is final)."""
        self._recovering = True
        try:
            await self._recover_window(head, error)
        finally:
            self._recovering = False

    async def _recover_window(self, head: Batch, error: BaseException) -> None:
        for batch, attempt in list(self.flight):
            outcome = await attempt
            if isinstance(outcome, AppendResult) and not outcome.duplicate:
                # Applied: so was everything of the lane before it. Kept, not resent.
                batch.known = outcome
        reordered = False
        if isinstance(error, WriterSeqMismatchError):
            last = error.last_writer_seq
            if last is not None and (self._acked is None or last > self._acked) and last < head.seq:
                # A batch of this lane given up on (delivery timeout) was applied after all:
                # the chain goes on from it.
                self._acked = last
                reordered = True
            elif head.prev is None or head.prev != self._acked or last is None or last < head.prev:
                # It overtook its predecessor (acknowledged since), or was chained on one
                # that failed: sent again at once, chained on the last one in. A few times
                # only: a store that keeps refusing has lost what it acknowledged.
                reordered = head.reorders < 3
                head.reorders += 1
        waited = 0.0 if reordered else self._backoff_s
        final = time.monotonic() + waited > head.deadline or not (reordered or _retryable(error))
        if final:
            self._acknowledge(head, error)
        resend = [batch for batch, _ in self.flight]
        self.flight.clear()
        self.queue.extendleft(reversed(resend))
        self._chain = self._acked
        if not final and not reordered:
            await asyncio.sleep(self._backoff_s)
            self._backoff_s = min(_MAX_BACKOFF_S, self._backoff_s * 2)


def _retryable(error: BaseException) -> bool:
    if isinstance(error, httpx.TransportError):
        return True
    return isinstance(error, SegmentStoreError) and error.code in RETRYABLE_CODES
