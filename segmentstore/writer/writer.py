"""What a container asks of its Storage Writer, what the writer asks of its container, and how
a container gets one (Pravega's ``Writer`` and ``WriterFactory``).

:class:`~segmentstore.writer.storage_writer.StorageWriter` is the implementation; a container
receives a :class:`WriterFactory` (the store's default builds a ``StorageWriter`` over the Tier 2
chunk storage with the ``storage_writer`` settings section), so a test can put a wrapped or
failing writer in its place.

The contract, method by method below, rests on these promises:

* **Ordering.** Merges and deletes reach Tier 2 in the order they were committed, and each
  before any later flush of the segments involved, so a deleted name's objects are gone before
  a new segment of that name writes any. A segment's bytes reach Tier 2 in offset order.
* **Durability.** The writer tells its host a new storage length (``storage_advanced``) only
  once Tier 2 holds those bytes durably under a manifest: only then may the cache evict them
  and Tier 1 be truncated behind them. A segment is :meth:`Writer.evictable` only once its
  manifest holds all of it: every byte, and its state as of its last operation.
* **Errors.** Tier 2 failures never escape: the writer retries them with capped backoff
  (``retry_min_ms`` .. ``retry_max_ms``) and shows the one being retried in
  :attr:`Writer.last_error`. Only fencing (a newer owner's epoch on a manifest) and a manifest
  that holds more of a segment than its metadata says exists stop it, through the host's
  ``writer_failed``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from segmentstore.metadata.container_metadata import ContainerMetadata, SegmentMetadata
from segmentstore.tier2 import SegmentState


@dataclass(frozen=True, slots=True)
class MergeEvent:
    """A committed merge: Tier 2 must move the source's chunks to the target."""

    sequence: int
    target_id: int
    source_name: str
    source_id: int
    target_offset: int
    source_length: int
    time_ms: int


@dataclass(frozen=True, slots=True)
class DeleteEvent:
    """A committed delete: Tier 2 must drop the segment's objects."""

    sequence: int
    name: str
    segment_id: int


class WriterHost(Protocol):
    """What the writer needs from its container (all called on the event loop)."""

    @property
    def durable_metadata(self) -> ContainerMetadata: ...

    def pin_pending(
        self, segment_id: int, offset: int, length: int
    ) -> tuple[list[memoryview], Callable[[], None]]:
        """Views of the segment's cached bytes ``[offset, offset + length)`` (no copy), valid
        until the returned release is called."""
        ...

    def storage_advanced(self, segment_id: int, storage_length: int) -> None:
        """Tier 2 durably holds the segment's bytes below ``storage_length``."""
        ...

    def segment_state(self, segment_id: int) -> tuple[SegmentState, int] | None:
        """What the segment's manifest is to keep of it now, and the sequence number of the
        last operation that state includes; None if the segment is gone."""
        ...

    def time_index_entries(
        self, segment_id: int, start: int, end: int
    ) -> list[tuple[int, int]]: ...

    def sealed_in_storage(self, segment_id: int) -> None: ...

    def structural_applied(self, sequence: int) -> None: ...

    def writer_failed(self, error: BaseException) -> None: ...


class Writer(Protocol):
    """One container's Storage Writer. Call it from the container's event loop."""

    @property
    def lag_bytes(self) -> int:
        """Bytes committed but not yet in Tier 2, over the segments it knows are behind."""
        ...

    @property
    def last_error(self) -> str | None:
        """The Tier 2 failure being retried now, or ``None``."""
        ...

    def appended(self, segment: SegmentMetadata) -> None:
        """Bytes were committed to ``segment``: flush once the threshold or interval says so."""
        ...

    def changed(self, segment: SegmentMetadata) -> None:
        """``segment`` was sealed or truncated: follow in Tier 2 without waiting."""
        ...

    def enqueue(self, event: MergeEvent | DeleteEvent) -> None:
        """A committed merge or delete, applied to Tier 2 in order of ``event.sequence``; the
        host's ``structural_applied`` hears of each once it is done."""
        ...

    def created(self, segment_id: int) -> None:
        """A segment was created (not replayed): Tier 2 has no manifest of it to read."""
        ...

    def removal_pending(self, name: str) -> bool:
        """Whether a committed delete (or merge) of segment ``name`` has yet to remove its
        objects from Tier 2: a manifest found there meanwhile belongs to no live segment."""
        ...

    def evictable(self, segment: SegmentMetadata) -> bool:
        """Whether Tier 2 holds all of ``segment`` (a durable segment): every byte, its start
        offset and seal, and its state as of its last operation, so that it may leave memory."""
        ...

    def want_saved(self, segment_id: int) -> None:
        """Bring the segment's manifest up to date soon, state included (an eviction waits
        for it)."""
        ...

    def forget(self, segment_id: int) -> None:
        """The segment left memory (evicted): drop what the writer keeps of it."""
        ...

    async def refresh(self, segment_id: int) -> None:
        """Learn the segment's storage length from its manifest now (a read found bytes
        neither cached nor below the storage length it knew). Raises ``Tier2Error``."""
        ...

    async def reconcile(self) -> None:
        """Before the container serves: take note of the segments whose metadata says that
        Tier 2 is behind, without reading Tier 2 (each segment's manifest is read when the
        segment is first flushed or read from Tier 2)."""
        ...

    def start(self) -> None:
        """Start the background loop (after :meth:`reconcile`)."""
        ...

    async def flush_all(self) -> None:
        """Write everything pending now (orderly shutdown, tests, benchmarks)."""
        ...

    async def stop(self) -> None:
        """Let the Tier 2 step under way finish, then stop; idempotent. What is still pending
        stays in Tier 1 and the cache for the next owner's writer."""
        ...


class WriterFactory(Protocol):
    """Builds a container's Storage Writer for the epoch its Tier 1 log was opened at (its
    Tier 2 writes carry it, so a stale owner's are refused), reporting to ``host``."""

    def __call__(self, container_id: int, epoch: int, host: WriterHost) -> Writer: ...
