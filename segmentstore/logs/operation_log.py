"""What a container asks of its Durable Log, and how it gets one (Pravega's ``OperationLog``
and ``OperationLogFactory``).

:class:`~segmentstore.logs.durable_log.DurableLog` is the implementation; a container receives
an :class:`OperationLogFactory` (the store's default builds a ``DurableLog`` with the
``durable_log`` settings section), so a test can put a wrapped or failing log in its place.

The contract, method by method below, rests on these promises:

* **Ordering.** Operations get strictly increasing sequence numbers in the order they are
  handed over; they are validated, written, made durable and committed in that order, and
  callers are answered in that order (a window of operations handed over together is answered
  together).
* **Durability.** An operation is acknowledged (its awaitable completes without a refusal)
  only once Tier 1 has it durably, and only then is it committed: applied to the durable
  metadata and the read index through the ``commit`` callback. Nothing unacknowledged is
  ever committed, so nothing unacknowledged is ever readable.
* **Refusals and failures.** An operation that does not fit the metadata (a sealed segment, a
  bad offset, ...) is refused alone: ``op.refusal`` holds its ``SegmentStoreError`` and nothing
  of it is written. A Tier 1 failure is final for the log: every operation not yet
  acknowledged, and every later one, fails with ``ContainerUnavailableError`` (or
  ``InsufficientStorageError`` when Tier 1 is out of space), none of them is committed, and
  ``on_failure`` is told once. The container must then be recovered from Tier 1 anew.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Protocol

from segmentstore.logs.operations import Operation
from segmentstore.metadata.container_metadata import ContainerMetadata
from segmentstore.tier1 import DurableDataLog


class OperationLog(Protocol):
    """One container's Durable Log. Not thread-safe: call it from the container's event loop."""

    @property
    def accepted(self) -> ContainerMetadata:
        """The metadata as of every operation accepted so far (durable or not): what the next
        operation is validated against. Only the log changes it, except storage lengths, which
        the Storage Writer advances in both copies."""
        ...

    @property
    def checkpoint_bytes(self) -> int:
        """The size of the last checkpoint written (0 before the first)."""
        ...

    @property
    def written_bytes(self) -> int:
        """Bytes of frames handed to Tier 1 since the log started."""
        ...

    def start(self) -> None:
        """Start processing. Call once, before the first operation."""
        ...

    async def process(self, op: Operation) -> None:
        """Hand ``op`` over and return once it is durable and committed.

        Raises ``op.refusal`` if it was refused, ``ContainerUnavailableError`` (or
        ``InsufficientStorageError``) if the log failed or stopped before ``op`` was durable,
        ``ThrottledError`` if Tier 1 stayed too far behind for ``throttle_max_delay_ms``.
        Cancelling the caller stops the waiting, not the operation: once handed over it is
        made or refused as if still awaited."""
        ...

    def submit(self, op: Operation, size: int = 0, reserved: int = 0) -> Awaitable[None]:
        """:meth:`process` for the append path, in two halves: the awaitable completes once
        ``op`` is durable and committed, or settled with ``op.refusal`` set (the caller reads
        it); a ``CancelledError`` from it goes to :meth:`settled`.

        ``size`` is the payload counted against back-pressure; ``reserved`` is cache room taken
        for ``op``, given back through ``release`` once ``op`` is settled, or at once if ``op``
        is not admitted. Raises ``ContainerUnavailableError`` at once (the awaitable is never
        made) when the log has failed, is stopping, or its Tier 1 cannot take records now."""
        ...

    async def settled(self, op: Operation, cancelled: asyncio.CancelledError) -> None:
        """Handle ``cancelled``, raised by awaiting :meth:`submit`'s awaitable for ``op``:
        re-raised if the current task is the one being cancelled, else wait until ``op`` is
        settled (another caller's cancellation reached a shared future)."""
        ...

    async def checkpoint(self) -> None:
        """Write a checkpoint of the accepted metadata and return once it is durable; errors as
        :meth:`process`. Tier 1 is only ever truncated at a checkpoint."""
        ...

    def truncate_behind_tier2(self) -> None:
        """Truncate Tier 1 below the newest durable checkpoint that every operation still
        needed follows, if that frees anything; also after a failure (Tier 1 out of space),
        when no new checkpoint can be written but the Storage Writer still moves data to
        Tier 2. A truncation that fails then is tried again at the next call."""
        ...

    async def stop(self) -> None:
        """Finish what was handed over (acknowledge or fail it), then stop; later operations
        fail with ``ContainerUnavailableError``. Idempotent. ``on_failure`` is not called."""
        ...


class OperationLogFactory(Protocol):
    """Builds a container's Durable Log over its opened Tier 1 log, starting from ``accepted``
    (the recovered metadata). The callbacks: ``commit`` applies a durable window of operations
    (in order, on the event loop); ``needed_sequence`` says the oldest operation Tier 1 must
    still keep (``None``: none); ``on_failure`` hears of a Tier 1 failure once; ``release``
    gives back cache room reserved for settled appends."""

    def __call__(
        self,
        container_id: int,
        data_log: DurableDataLog,
        accepted: ContainerMetadata,
        *,
        commit: Callable[[list[Operation]], None],
        needed_sequence: Callable[[], int | None],
        on_failure: Callable[[BaseException], None],
        release: Callable[[int], None],
    ) -> OperationLog: ...
