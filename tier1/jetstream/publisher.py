"""The pipelined publisher of one JetStream data log: many messages in flight, no gaps.

Every message carries ``Nats-Expected-Last-Sequence`` chained on the message before it, so the
stream stores it only directly after its predecessor: a message lost in the middle makes every
later one fail, and the stream stays a gap-free prefix of what was sent. A previous owner's
chain breaks at the new owner's fence message, which is how a stale owner is stopped.

Acknowledgements come back to one inbox subscription (nats-py's ``publish_async`` futures can
hang when the server answers an error, so this does its own bookkeeping). When a message is not
acknowledged in ``ack_timeout_ms``, or the stream answers "no responders" (a leader election,
or a newer owner took the stream) or a broken chain, the publisher stops sending, lets what is
in flight settle, checks that no newer epoch owns the stream, and *probes* the stream at the
sequence the first unacknowledged message expected: if that message is there (its
acknowledgement was lost) it counts as acknowledged; if nothing is there, everything from it
on is sent again; if another writer's message is there, the log is fenced. Retrying goes on
for at most ``write_timeout_ms``, then every unacknowledged record fails.

Records resolve in append order, each once all of its messages are acknowledged (a quorum of
the stream's replicas has them).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.errors import Error as NatsError
from nats.js.errors import NotFoundError

from segmentstore.tier1.errors import DataLogError, DataLogFencedError, DataLogWriteError
from segmentstore.tier1.jetstream import wire
from segmentstore.tier1.jetstream.nats_errors import describe
from segmentstore.tier1.jetstream.options import JetStreamOptions

log = logging.getLogger(__name__)

# Answers that say the message may yet be stored, or was not stored for now: probe and send
# again. A broken chain (10071, and 10164 as newer servers say it), and a message whose id is
# still being stored from an earlier send (10158: a retry that overtook its original).
UNSETTLED = {10071, 10164, 10158}
INSUFFICIENT_RESOURCES = 10023
STORE_FAILED = 10077  # the stream's store refused: full ("maximum bytes exceeded"), or closed
_PROBE_BACKOFF_S = (0.05, 0.1, 0.2, 0.5, 1.0)


@dataclass(slots=True)
class _Message:
    number: int
    expected: int  # the stream's last sequence this message must follow
    data: bytes
    headers: dict[str, str]
    record: _Record
    sequence: int = 0  # once acknowledged
    sent_at: float = 0.0
    trouble: bool = False  # answered with an error or "no responders" in this round


@dataclass(slots=True)
class _Record:
    future: asyncio.Future[int]
    messages: int
    acknowledged: int = 0
    first_sequence: int = 0
    size: int = 0


@dataclass(slots=True)
class _Pipeline:
    """What was queued and is not acknowledged yet, in order; the first ``sent`` went out in
    this round."""

    messages: deque[_Message] = field(default_factory=deque)
    records: deque[_Record] = field(default_factory=deque)
    by_number: dict[int, _Message] = field(default_factory=dict)
    sent: int = 0
    in_flight_bytes: int = 0


class Publisher:
    def __init__(
        self,
        client: Client,
        probe: Callable[[int], Any],
        check_ownership: Callable[[], Any],
        subject: str,
        epoch: int,
        last_sequence: int,
        max_part_bytes: int,
        options: JetStreamOptions,
        on_acknowledged: Callable[[int], None],
    ) -> None:
        self._client = client
        self._probe = probe  # sequence -> awaitable of the stored message's id (or NotFound)
        # -> awaitable; raises DataLogFencedError if a newer epoch owns the stream
        self._check_ownership = check_ownership
        self._subject = subject
        self._epoch = epoch
        self._next_expected = last_sequence
        self._max_part_bytes = max_part_bytes
        self._options = options
        self._on_acknowledged = on_acknowledged
        self._inbox = client.new_inbox()
        self._pipeline = _Pipeline()
        self._counter = 0
        self._failure: DataLogError | None = None
        # When the first unacknowledged message ran into trouble; cleared by progress. Retrying
        # stops write_timeout_ms after it.
        self._stalled_since: float | None = None
        self._trouble = False
        self._rounds = 0  # recoveries since the last progress, for their backoff
        self._wake = asyncio.Event()
        self._subscription: Any = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._subscription = await self._client.subscribe(f"{self._inbox}.*", cb=self._on_ack)
        self._task = asyncio.create_task(self._pump(), name=f"publisher {self._subject}")
        self._task.add_done_callback(self._on_pump_done)

    @property
    def failure(self) -> DataLogError | None:
        return self._failure

    @property
    def stalled(self) -> bool:
        """Retrying: a message went unacknowledged and nothing was acknowledged since."""
        return self._stalled_since is not None

    def append(self, record: bytes, future: asyncio.Future[int]) -> None:
        parts = wire.split(record, self._max_part_bytes)
        entry = _Record(future, len(parts), size=len(record))
        pipeline = self._pipeline
        pipeline.records.append(entry)
        for index, part in enumerate(parts):
            self._counter += 1
            headers = {
                wire.EXPECTED_LAST_SEQUENCE: str(self._next_expected),
                wire.MESSAGE_ID: f"{self._epoch}-{self._counter}",
                wire.EPOCH: str(self._epoch),
                **wire.part_header(index, len(parts)),
            }
            message = _Message(self._counter, self._next_expected, part, headers, entry)
            self._next_expected += 1
            pipeline.messages.append(message)
            pipeline.by_number[message.number] = message
        self._wake.set()

    async def drain(self) -> None:
        """Until every queued record is acknowledged or failed."""
        while self._pipeline.records and self._failure is None:
            await asyncio.sleep(0.005)

    async def stop(self) -> None:
        # Failing first ends the pump's loops at their next turn even if the cancellation is
        # lost: Python 3.11's asyncio.wait_for (in the pump and in nats-py's calls) returns the
        # result of a wait that ended as the task was cancelled, and drops the cancellation.
        self.fail(DataLogWriteError("data log closed with records unacknowledged"))
        if self._task is not None:
            self._task.cancel()
            # A pump that died was reported when it did (_on_pump_done failed every record):
            # stopping it must not raise that again, or the container could never be closed
            # and recovered.
            await asyncio.gather(self._task, return_exceptions=True)
        if self._subscription is not None:
            with contextlib.suppress(NatsError):
                await self._subscription.unsubscribe()

    def fail(self, error: DataLogError) -> None:
        """Fail every record not yet acknowledged; the publisher accepts nothing more."""
        if self._failure is None:
            self._failure = error
        pipeline = self._pipeline
        while pipeline.records:
            record = pipeline.records.popleft()
            if not record.future.done():
                record.future.set_exception(copy_error(error))
        pipeline.messages.clear()
        pipeline.by_number.clear()
        pipeline.sent = pipeline.in_flight_bytes = 0
        self._wake.set()

    # -- acknowledgements --------------------------------------------------------------------

    async def _on_ack(self, msg: Msg) -> None:
        number = int(msg.subject.rsplit(".", 1)[1])
        message = self._pipeline.by_number.get(number)
        if message is None or message.sequence:
            return  # an answer to a message already settled (a late duplicate)
        if msg.headers and msg.headers.get("Status") == "503":
            self._note_trouble(message)  # no responders: the stream has no leader right now
            return
        try:
            answer = json.loads(msg.data)
        except ValueError:
            self._note_trouble(message)
            return
        error = answer.get("error")
        if error is None:
            self._acknowledge(message, int(answer["seq"]))
            return
        code = error.get("err_code")
        description = str(error.get("description") or "")
        if _out_of_space(code, description):
            # As a full disk would: the record is refused, and so is every one after it.
            self.fail(DataLogWriteError(f"JetStream is out of space: {description}", errno.ENOSPC))
        elif code in UNSETTLED or error.get("code") == 503:
            self._note_trouble(message)  # may yet land, or will not: the probe tells
        else:
            self.fail(DataLogWriteError(f"JetStream refused a record: {description}"))

    def _acknowledge(self, message: _Message, sequence: int) -> None:
        if sequence != message.expected + 1:
            self.fail(
                DataLogWriteError(
                    f"JetStream stored a record at {sequence}, expected {message.expected + 1}"
                )
            )
            return
        message.sequence = sequence
        pipeline = self._pipeline
        while pipeline.messages and pipeline.messages[0].sequence:
            done = pipeline.messages.popleft()
            del pipeline.by_number[done.number]
            pipeline.sent -= 1
            pipeline.in_flight_bytes -= len(done.data)
            record = done.record
            if record.acknowledged == 0:
                record.first_sequence = done.sequence
            record.acknowledged += 1
            self._stalled_since = None
            self._rounds = 0
        while pipeline.records and pipeline.records[0].acknowledged == pipeline.records[0].messages:
            record = pipeline.records.popleft()
            self._on_acknowledged(record.size)
            if not record.future.done():
                record.future.set_result(record.first_sequence)
        self._wake.set()

    def _note_trouble(self, message: _Message) -> None:
        message.trouble = True
        self._trouble = True
        if self._stalled_since is None:
            self._stalled_since = time.monotonic()
        self._wake.set()

    # -- the pump ----------------------------------------------------------------------------

    async def _pump(self) -> None:
        ack_timeout = self._options.ack_timeout_ms / 1000
        while self._failure is None:
            self._wake.clear()
            pipeline = self._pipeline
            if not self._trouble:
                await self._send_more()
            head = pipeline.messages[0] if pipeline.sent else None
            if head is not None and time.monotonic() - head.sent_at > ack_timeout:
                self._note_trouble(head)
            if self._trouble and self._settled_or_overdue(ack_timeout):
                await self._recover()
                continue
            wait = (
                ack_timeout
                if head is None
                else max(0.0, head.sent_at + ack_timeout - time.monotonic())
            )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=min(wait, 0.25) + 0.001)

    async def _send_more(self) -> None:
        pipeline = self._pipeline
        limit = self._options.max_in_flight_bytes
        now = time.monotonic()
        while pipeline.sent < len(pipeline.messages) and (
            pipeline.in_flight_bytes < limit or pipeline.sent == 0
        ):
            message = pipeline.messages[pipeline.sent]
            message.sent_at = now
            message.trouble = False
            pipeline.sent += 1
            pipeline.in_flight_bytes += len(message.data)
            await self._client.publish(
                self._subject,
                message.data,
                reply=f"{self._inbox}.{message.number}",
                headers=message.headers,
            )

    def _settled_or_overdue(self, ack_timeout: float) -> bool:
        """Every message of this round is acknowledged, in trouble, or past its timeout."""
        now = time.monotonic()
        return all(
            m.sequence or m.trouble or now - m.sent_at > ack_timeout
            for m in list(self._pipeline.messages)[: self._pipeline.sent]
        )

    async def _recover(self) -> None:
        """Learn what the stream holds after the first unacknowledged message, then go on."""
        # A late acknowledgement may have cleared the stall since the trouble was noted: then
        # the clock starts now.
        stalled_since = self._stalled_since
        if stalled_since is None:
            stalled_since = self._stalled_since = time.monotonic()
        deadline = stalled_since + self._options.write_timeout_ms / 1000
        pipeline = self._pipeline
        attempt = 0
        while pipeline.messages and self._failure is None:
            if time.monotonic() > deadline:
                self.fail(
                    DataLogWriteError(
                        "JetStream did not acknowledge a record within"
                        f" {self._options.write_timeout_ms} ms"
                    )
                )
                return
            head = pipeline.messages[0]
            try:
                await self._check_ownership()
                stored_id = await self._probe(head.expected + 1)
            except DataLogFencedError as fenced:
                self.fail(fenced)
                return
            except NotFoundError:
                break  # nothing stored after the last acknowledged message: send again
            except (NatsError, TimeoutError) as error:
                delay = _PROBE_BACKOFF_S[min(attempt, len(_PROBE_BACKOFF_S) - 1)]
                log.debug("probing %s failed (%r); again in %.2f s", self._subject, error, delay)
                attempt += 1
                await asyncio.sleep(delay)
                continue
            if stored_id != head.headers[wire.MESSAGE_ID]:
                self.fail(DataLogFencedError(self._epoch, self._epoch + 1))
                return
            self._acknowledge(head, head.expected + 1)  # stored; only its answer was lost
        if self._failure is not None:
            return
        if self._rounds:
            # Not the first round without progress: give the servers time (an election).
            await asyncio.sleep(_PROBE_BACKOFF_S[min(self._rounds, len(_PROBE_BACKOFF_S) - 1)])
        self._rounds += 1
        log.info("data log %s sends again from its first unacknowledged record", self._subject)
        pipeline.sent = 0
        pipeline.in_flight_bytes = 0
        self._trouble = False

    def _on_pump_done(self, task: asyncio.Task[None]) -> None:
        if task.cancelled():
            return
        error = task.exception()
        if error is not None:
            log.error("the publisher of %s died", self._subject, exc_info=error)
            self.fail(DataLogWriteError(f"the JetStream publisher died: {describe(error)}"))


def _out_of_space(code: object, description: str) -> bool:
    words = description.lower()
    return code == INSUFFICIENT_RESOURCES or (
        code == STORE_FAILED and ("bytes" in words or "space" in words or "resources" in words)
    )


def copy_error(error: DataLogError) -> DataLogError:
    """A fresh exception per future: one instance raised in many places grows one traceback."""
    copy = type(error).__new__(type(error))
    copy.__dict__.update(error.__dict__)
    copy.args = error.args
    return copy
