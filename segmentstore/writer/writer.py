"""What a container asks of its Storage Writer, and how it gets one (Pravega's ``Writer`` and
``WriterFactory``).

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
  and Tier 1 be truncated behind them.
* **Errors.** Tier 2 failures never escape: the writer retries them with capped backoff
  (``retry_min_ms`` .. ``retry_max_ms``) and shows the one being retried in
  :attr:`last_error`. Only fencing (a newer owner's epoch on a manifest) and a reconciliation
  that finds Tier 2 ahead of Tier 1 stop it, through the host's ``writer_failed``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from segmentstore.metadata.container_metadata import SegmentMetadata

if TYPE_CHECKING:
    from segmentstore.writer.storage_writer import DeleteEvent, MergeEvent, WriterHost


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

    async def reconcile(self) -> None:
        """Before the container serves: learn each segment's storage length from Tier 2
        (retrying while Tier 2 is unreachable). Raises ``Tier2ReconciliationError`` when Tier 2
        holds more of a segment than its metadata says exists, ``FencedError`` when a newer
        owner has it."""
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
