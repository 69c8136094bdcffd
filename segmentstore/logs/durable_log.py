"""The Durable Log of one container: operation queue → processor → data frames → Tier 1.

Callers enqueue operations and await a future shared by every operation enqueued in the same
*batch window* (one future per batch, not per operation, keeps the per-append cost low). A
window is processed as soon as it holds ``batch_seal_bytes``, else by the processor task at the
end of the loop iteration. Processing prepares each operation against the accepted
metadata (validation, offsets, sequence numbers), packs the written ones into frames and hands
the frames to Tier 1 without waiting, so several frames are in flight. Tier 1 acknowledges
frames in order; once every frame of a window is durable, the window's operations are committed
(applied to the durable metadata and the read index, through ``commit``) and its future is
resolved. Acknowledgement order is therefore frame order.

A caller that is cancelled while it awaits a window's future cancels that shared future (that is
what a task's cancellation does to the future it awaits). Its operation goes on regardless, and
the others sharing the window, woken with a ``CancelledError`` that is not theirs, wait for the
window through :meth:`settled` instead: a rare path, which keeps the common one free of a
future per operation.

A metadata checkpoint is injected every ``checkpoint_every_frames`` frames or
``checkpoint_every_bytes`` bytes, but never before the log has grown by as much as the last
checkpoint took: a checkpoint's size grows with the active segments, so checkpoints never take
more than about half of what Tier 1 writes, or of the processor's time. After a checkpoint is
durable, Tier 1 is truncated at the newest durable checkpoint that precedes every operation
still needed (``needed_sequence``), so the log always starts with a checkpoint and recovery
stays bounded.

A Tier 1 failure is final for this instance: every pending and later operation fails with
``ContainerUnavailableError`` and ``on_failure`` is told; the container must be recovered anew.
One that failed because Tier 1 is out of space can still truncate it
(:meth:`truncate_behind_tier2`) as the Storage Writer moves data to Tier 2: that is how a full
Tier 1 gets the room its recovery needs.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from segmentstore.contracts.errors import (
    ContainerUnavailableError,
    InsufficientStorageError,
    SegmentStoreError,
    ThrottledError,
)
from segmentstore.logs.data_frame import DataFrameBuilder, Frame
from segmentstore.logs.operations import CheckpointOperation, Operation
from segmentstore.metadata.container_metadata import ContainerMetadata
from segmentstore.settings import DurableLogSettings
from segmentstore.tier1 import DataLogError, DataLogWriteError, DurableDataLog

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Window:
    """Operations enqueued together; they are acknowledged together."""

    future: asyncio.Future[None]
    ops: list[Operation] = field(default_factory=list)
    bytes: int = 0
    reserved: int = 0  # cache room its operations hold, handed back when it is settled
    # Futures of those waiting through settled(): resolved when the window is settled.
    late: list[asyncio.Future[None]] = field(default_factory=list)
    # Filled by the processor:
    written: list[Operation] = field(default_factory=list)
    checkpoints: list[CheckpointOperation] = field(default_factory=list)  # among the written
    frames_needed: int = 0  # durable frame count at which the whole window is durable


class DurableLog:
    def __init__(
        self,
        container_id: int,
        data_log: DurableDataLog,
        accepted: ContainerMetadata,
        settings: DurableLogSettings,
        commit: Callable[[list[Operation]], None],
        needed_sequence: Callable[[], int | None],
        on_failure: Callable[[BaseException], None],
        release: Callable[[int], None],
    ) -> None:
        self._container_id = container_id
        self._data_log = data_log
        # Only a log that can stall (a replicated one) is asked, once per operation, whether
        # it takes records now: the local log always does, and the append path stays lean.
        self._may_stall = type(data_log).available is not DurableDataLog.available
        self._accepted = accepted
        self._settings = settings
        self._commit = commit
        self._needed_sequence = needed_sequence
        self._on_failure = on_failure
        self._release = release
        self._builder = DataFrameBuilder(settings.max_frame_bytes)
        # Read on every append.
        self._max_in_flight_bytes = settings.max_in_flight_bytes
        self._batch_seal_bytes = settings.batch_seal_bytes
        self._queue: list[_Window] = []
        self._open: _Window | None = None
        self._in_flight: deque[_Window] = deque()
        self._wakeup: asyncio.Future[None] | None = None
        self._space: asyncio.Future[None] | None = None
        self._frames_submitted = 0
        self._frames_durable = 0
        self._in_flight_bytes = 0
        self._frames_since_checkpoint = 0
        self._bytes_since_checkpoint = 0
        self._last_checkpoint_bytes = 0
        self._written_bytes = 0
        self._checkpoint_pending = False
        self._durable_checkpoints: deque[tuple[int, int]] = deque()  # (sequence, address)
        self._truncated_below = 0
        self._truncation: asyncio.Task[None] | None = None
        self._failure: BaseException | None = None
        self._closing = False
        self._task: asyncio.Task[None] | None = None

    # -- public ---------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"durable-log-{self._container_id}"
        )
        self._task.add_done_callback(self._on_task_done)

    @property
    def accepted(self) -> ContainerMetadata:
        """The accepted metadata (the Storage Writer updates storage lengths in it)."""
        return self._accepted

    @property
    def in_flight_bytes(self) -> int:
        return self._in_flight_bytes

    @property
    def checkpoint_bytes(self) -> int:
        """The size of the last checkpoint written (it grows with the active segments)."""
        return self._last_checkpoint_bytes

    @property
    def written_bytes(self) -> int:
        """Bytes of frames handed to Tier 1 since this log started."""
        return self._written_bytes

    @property
    def queue_depth(self) -> int:
        return sum(len(w.ops) for w in self._queue)

    async def process(self, op: Operation) -> None:
        """Enqueue ``op`` and return once it is durable and applied; raise if it was refused."""
        try:
            await self.submit(op)
        except asyncio.CancelledError as cancelled:
            await self.settled(op, cancelled)
        if op.refusal is not None:
            raise op.refusal

    def submit(self, op: Operation, size: int = 0, reserved: int = 0) -> Awaitable[None]:
        """:meth:`process` without its last steps, for the append path (one coroutine less per
        append): the awaitable completes once ``op`` is durable and applied, or refused with
        ``op.refusal`` set. A ``CancelledError`` from it goes to :meth:`settled`.

        ``size`` is an append's payload size (back-pressure counts it). ``reserved`` is cache
        room taken for ``op``: it goes back through ``release`` once ``op`` is settled
        (acknowledged, refused or failed), or at once if ``op`` is not admitted."""
        if self._in_flight_bytes + size > self._max_in_flight_bytes:
            return self._submit_when_room(op, size, reserved)
        if (
            self._failure is not None
            or self._closing
            or (self._may_stall and not self._data_log.available)
        ):
            self._release(reserved)
            raise self._unavailable()
        window = self._open
        if window is None:
            window = self._open = _Window(asyncio.get_running_loop().create_future())
            self._queue.append(window)
            if self._wakeup is not None and not self._wakeup.done():
                self._wakeup.set_result(None)
        window.ops.append(op)
        window.bytes += size
        window.reserved += reserved
        self._in_flight_bytes += size
        if window.bytes >= self._batch_seal_bytes:
            # Hand a full window to Tier 1 now rather than at the end of the loop iteration:
            # its write and fsync then overlap the Python work of the next window.
            self._drain()
        return window.future

    async def _submit_when_room(self, op: Operation, size: int, reserved: int) -> None:
        try:
            await self._wait_for_space(size)
        except BaseException:
            self._release(reserved)
            raise
        await self.submit(op, size, reserved)

    async def settled(self, op: Operation, cancelled: asyncio.CancelledError) -> None:
        """Handle ``cancelled``, raised by awaiting what :meth:`submit` returned for ``op``.
        If the current task is being cancelled, it is re-raised. Else another caller's
        cancellation cancelled the window's shared future: wait until ``op`` is settled
        (``op.refusal`` then tells a refusal or a failure from success)."""
        task = asyncio.current_task()
        if task is None or task.cancelling():
            raise cancelled
        for window in (*self._queue, *self._in_flight):
            if any(queued is op for queued in window.ops):
                await self._late_wait(window)
                return
        # Not found: settled already.

    async def _late_wait(self, window: _Window) -> None:
        late: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        window.late.append(late)
        await late

    async def checkpoint(self) -> None:
        """Write a metadata checkpoint now and wait until it is durable."""
        await self.process(CheckpointOperation())

    async def stop(self) -> None:
        """Finish what was enqueued, then stop. Idempotent."""
        self._closing = True
        if self._task is None:
            return
        while (self._queue or self._in_flight) and self._failure is None:
            # The tail's own future may have been cancelled by a caller: wait for the window.
            await self._late_wait((self._queue or self._in_flight)[-1])
        if self._truncation is not None:
            await asyncio.wait([self._truncation])
        self._task.cancel()
        await asyncio.wait([self._task])
        self._fail(self._unavailable(), notify=False)

    # -- processor ------------------------------------------------------------------------

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if not self._queue:
                self._wakeup = loop.create_future()
                await self._wakeup
                continue
            self._drain()

    def _drain(self) -> None:
        windows, self._queue, self._open = self._queue, [], None
        if self._checkpoint_pending:
            self._checkpoint_pending = False
            windows[-1].ops.append(CheckpointOperation())
        try:
            self._process(windows)
        except Exception as error:
            # Not a refusal (those are per operation): a bug. The accepted metadata may be
            # half changed, so this instance fails; the windows not yet handed to Tier 1 fail
            # with it instead of waiting forever.
            log.exception("container %d: processing operations failed", self._container_id)
            self._queue[:0] = [w for w in windows if w not in self._in_flight]
            self._fail(error)

    def _process(self, windows: list[_Window]) -> None:
        accepted = self._accepted
        builder = self._builder
        now_ms = time.time_ns() // 1_000_000
        for window in windows:
            for op in window.ops:
                op.sequence = accepted.sequence + 1
                op.time_ms = now_ms
                try:
                    written = op.prepare(accepted)
                except SegmentStoreError as error:
                    if not error.on_the_wire:
                        raise  # the metadata is inconsistent, not the request wrong: fail
                    op.refusal = error
                    continue
                if written:
                    window.written.append(op)
                    if type(op) is CheckpointOperation:
                        window.checkpoints.append(op)
                        self._last_checkpoint_bytes = len(op.body)
            builder.add_all(window.written)
            frames = builder.take_frames()
            for frame in frames:
                self._submit(frame)
            if window.checkpoints:
                # The growth that pays for the next checkpoint starts after this one, whoever
                # asked for it, and is not this one's own bytes: counting those, one large
                # checkpoint paid for the next at once, and checkpoints of many active
                # segments came one after another (1.7 KB of Tier 1 per segment at a million).
                self._frames_since_checkpoint = self._bytes_since_checkpoint = 0
                self._checkpoint_pending = False
            # A window that wrote nothing is still acknowledged after everything before it.
            window.frames_needed = self._frames_submitted
            self._in_flight.append(window)
        self._complete_durable_windows()

    def _submit(self, frame: Frame) -> None:
        future = self._data_log.append(frame.parts)
        future.add_done_callback(functools.partial(self._on_frame_done, frame))
        self._frames_submitted += 1
        self._frames_since_checkpoint += 1
        self._bytes_since_checkpoint += frame.size
        self._written_bytes += frame.size
        s = self._settings
        if (
            self._frames_since_checkpoint >= s.checkpoint_every_frames
            or self._bytes_since_checkpoint >= s.checkpoint_every_bytes
        ) and self._bytes_since_checkpoint >= self._last_checkpoint_bytes:
            self._frames_since_checkpoint = self._bytes_since_checkpoint = 0
            self._checkpoint_pending = True

    def _on_frame_done(self, frame: Frame, future: asyncio.Future[int]) -> None:
        error = future.exception()  # retrieved even after a failure: the log fails them all
        if self._failure is not None:
            return
        if error is not None:
            self._fail(error)
            return
        address = future.result()
        for op in frame.addressed:
            op.address = address
        self._frames_durable += 1
        self._complete_durable_windows()

    def _complete_durable_windows(self) -> None:
        in_flight = self._in_flight
        checkpointed = False
        while in_flight and in_flight[0].frames_needed <= self._frames_durable:
            window = in_flight.popleft()
            try:
                self._commit(window.written)
            except Exception as error:
                # Durable in Tier 1 but not applied: this instance cannot go on. Recovery
                # will apply it from the log.
                in_flight.appendleft(window)
                self._fail(error)
                return
            self._in_flight_bytes -= window.bytes
            self._release(window.reserved)
            for checkpoint in window.checkpoints:
                self._durable_checkpoints.append((checkpoint.sequence, checkpoint.address))
                checkpointed = True
            if not window.future.done():
                window.future.set_result(None)
            for late in window.late:
                if not late.done():
                    late.set_result(None)
        if self._space is not None and not self._space.done():
            self._space.set_result(None)
        if checkpointed:
            self._maybe_truncate()

    # -- Tier 1 truncation ----------------------------------------------------------------

    def truncate_behind_tier2(self) -> None:
        """Truncate Tier 1 at the newest durable checkpoint that precedes everything still
        needed, if that frees anything: for a log that failed (Tier 1 out of space) and
        writes no checkpoint of its own any more, after the Storage Writer moved more of it
        to Tier 2."""
        self._maybe_truncate()

    def _maybe_truncate(self) -> None:
        if self._truncation is not None and not self._truncation.done():
            return
        # A checkpoint qualifies if every operation still needed comes after it in the log;
        # operations sharing its frame but preceding it are skipped by recovery.
        needed = self._needed_sequence()
        checkpoints = self._durable_checkpoints
        target: tuple[int, int] | None = None
        while checkpoints and (needed is None or checkpoints[0][0] < needed):
            target = checkpoints.popleft()
        if target is None:
            return
        checkpoints.appendleft(target)  # now the log's first record; later ones start above it
        address = target[1]
        if address <= self._truncated_below:
            return
        before, self._truncated_below = self._truncated_below, address
        self._truncation = asyncio.get_running_loop().create_task(self._truncate(address, before))

    async def _truncate(self, address: int, before: int) -> None:
        try:
            await self._data_log.truncate(address)
            log.debug("container %d: Tier 1 truncated below %d", self._container_id, address)
        except DataLogError as error:
            if self._failure is not None:
                # Already failed (out of space, say): the next try may have the room.
                self._truncated_below = before
                log.debug("container %d: cannot truncate Tier 1 yet: %s", self._container_id, error)
                return
            self._fail(error)

    # -- back-pressure and failure --------------------------------------------------------

    async def _wait_for_space(self, size: int) -> None:
        deadline = time.monotonic() + self._settings.throttle_max_delay_ms / 1000
        loop = asyncio.get_running_loop()
        while self._in_flight_bytes + size > self._settings.max_in_flight_bytes:
            if self._failure is not None:
                raise self._unavailable()
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self._in_flight_bytes:
                raise ThrottledError("Tier 1 is behind", retry_after_ms=1000)
            if self._space is None or self._space.done():
                self._space = loop.create_future()
            await asyncio.wait([self._space], timeout=remaining)

    def _unavailable(self) -> SegmentStoreError:
        failure = self._failure
        if isinstance(failure, DataLogWriteError) and failure.out_of_space:
            return InsufficientStorageError(f"Tier 1 is out of space: {failure}")
        if isinstance(failure, SegmentStoreError) and failure.on_the_wire:
            return failure
        if failure is None and not self._closing:
            # A replicated Tier 1 retrying through a leader election: what is queued waits for
            # it; new changes are turned away at once with a retryable 503, not left hanging.
            return ContainerUnavailableError(
                self._container_id, "Tier 1 is electing a leader", 2000
            )
        reason = "stopped" if failure is None else f"Tier 1 failed: {failure}"
        return ContainerUnavailableError(self._container_id, reason)

    def _on_task_done(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            self._fail(task.exception())  # type: ignore[arg-type]

    def _fail(self, error: BaseException, notify: bool = True) -> None:
        if self._failure is None:
            self._failure = error
            if notify:
                log.error("container %d: durable log failed: %s", self._container_id, error)
                self._on_failure(error)
        unavailable = self._unavailable()
        for window in [*self._in_flight, *self._queue]:
            self._release(window.reserved)
            # Whoever comes through settled(), now or later, reads the outcome from here.
            for op in window.ops:
                if op.refusal is None:
                    op.refusal = unavailable
            if not window.future.done():
                window.future.set_exception(unavailable)
                window.future.exception()  # retrieved: nobody may be awaiting it
            for late in window.late:
                if not late.done():
                    late.set_result(None)
        self._in_flight.clear()
        self._queue.clear()
        self._open = None
        if self._space is not None and not self._space.done():
            self._space.set_result(None)
