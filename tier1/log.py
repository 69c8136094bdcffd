"""The durable data log contract that every Tier 1 implementation honours.

A log is an ordered sequence of opaque records, each with an *address*: an integer that
strictly increases from record to record (not necessarily by one). The contract:

* **Ownership and epoch.** :meth:`open` takes exclusive ownership and durably bumps the epoch
  before returning it, so a previous owner can be told apart (and, where the medium supports it,
  fenced: its next append fails with ``DataLogFencedError``). An opener may ask for an epoch of
  at least ``min_epoch``: a log rebuilt after its medium was lost must outrank the owners that
  Tier 2 remembers.
* **Ordering.** Records are durable and readable in the order :meth:`append` was called. The
  futures it returns resolve in that same order.
* **Durability.** A future resolves with the record's address only once the record, and every
  record appended before it, survives a crash of the process or the machine (fsync, or a quorum
  of replicas). If a write fails, that future and all later ones fail with a ``DataLogError``;
  the log accepts nothing more and must be reopened.
* **Atomicity.** After a crash a record is either wholly readable or absent. An incomplete or
  corrupt record at the very tail (a torn write) is dropped on :meth:`open`. A corrupt record
  anywhere else is never skipped: :meth:`read` raises ``DataLogCorruptionError``.
* **Truncation.** :meth:`truncate` durably discards every record below an address; the space is
  reclaimed in whole pieces (files, ledgers). :meth:`read` never returns a truncated record.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

Buffer = bytes | bytearray | memoryview


@dataclass(frozen=True, slots=True)
class LogRecord:
    address: int
    data: bytes


class DurableDataLog(ABC):
    """One container's Tier 1 log. Not thread-safe: call it from one event loop."""

    @abstractmethod
    async def open(self, min_epoch: int = 0) -> int:
        """Take ownership, drop a torn tail, durably bump the epoch (to at least ``min_epoch``)
        and return it. Call once, before anything else.

        Durability: the new epoch is durable before it is returned, so no later opener can be
        handed the same one. Errors: ``DataLogLockedError`` (another process owns the log),
        ``DataLogWriteError`` (the medium refused the epoch or is unreachable: nothing was
        taken over), ``DataLogCorruptionError`` (a damaged record that is not the tail)."""

    @property
    @abstractmethod
    def epoch(self) -> int:
        """The epoch :meth:`open` returned."""

    @abstractmethod
    def append(self, parts: Sequence[Buffer]) -> asyncio.Future[int]:
        """Queue one record made of ``parts`` (concatenated) and return a future of its address.

        Returns at once, without blocking; the caller must not modify the buffers until the
        future is done. Ordering: records are written, and their futures resolve, in the order
        of the calls; addresses strictly increase. Durability: a future resolves only once its
        record and every earlier one survive a crash. Errors (through the future, never
        raised): ``DataLogWriteError`` when the medium refused a write or a sync,
        ``DataLogFencedError`` when a newer epoch took the log over, ``DataLogClosedError``
        when the log was closed first; the first failure fails that future and every later
        one, and the log takes nothing more until it is opened anew.
        """

    @abstractmethod
    def read(self, from_address: int = 0) -> AsyncIterator[LogRecord]:
        """Yield every record at or above ``from_address`` that is not truncated, in address
        order, with no gap: what an acknowledged append wrote is there. Meant for recovery,
        after :meth:`open` and before the first :meth:`append`. Errors:
        ``DataLogCorruptionError`` at a damaged record that is not the tail (never skipped),
        ``DataLogWriteError`` when the medium cannot be read."""

    @abstractmethod
    async def truncate(self, below_address: int) -> None:
        """Durably discard every record whose address is below ``below_address``: once this
        returns, :meth:`read` never yields them, even after a crash. Space is reclaimed in
        whole pieces, so some records below the address may stay readable until their piece
        goes. Truncating below an address already truncated does nothing; past the next
        append's address is a caller's bug (``ValueError``). Errors:
        ``DataLogWriteError`` (the medium refused; the records may still be there, which is
        safe), ``DataLogFencedError``."""

    @property
    def available(self) -> bool:
        """False while the medium is known to be unable to make records durable for now (a
        replicated log electing a leader): appends still queue and are retried, but a caller
        may turn new work away with a retryable error instead of letting it wait."""
        return True

    @property
    @abstractmethod
    def size_bytes(self) -> int:
        """Bytes the log currently occupies on its medium (for metrics and back-pressure)."""

    def has_room(self, nbytes: int) -> bool:
        """Whether the medium has about ``nbytes`` free now: after an out-of-space failure, the
        owner asks this before it reopens the log. A log that cannot tell answers True."""
        return True

    @abstractmethod
    async def close(self) -> None:
        """Wait for queued appends to finish (or fail), then release ownership; later calls
        fail with ``DataLogClosedError``. Idempotent; never raises."""
