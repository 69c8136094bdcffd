"""A node's view of its cluster's lease bucket, kept current by one long-lived watcher.

Reading the bucket afresh for every look would create a JetStream consumer each time, and a
stream refuses new consumers past its limit (1,000): a cluster doing that every tick freezes
within minutes. So the view is pushed instead: one watcher (an ordered consumer that
JetStream deletes :data:`CONSUMER_IDLE_S` after nobody listens to it, and this node deletes
itself when it stops one) delivers every key's last entry and then every change.

Every :data:`RESYNC_S` the watcher is replaced by a fresh one whose first delivery is the
bucket as it is then, so that the view never drifts from the bucket for long, whatever a
consumer may have missed; the old one is deleted once the new one has delivered. A watcher
that delivers nothing for a lease (at least :data:`CONSUMER_IDLE_S`) is replaced at once:
members renew far more often, so its consumer is gone (deleted by JetStream while this node
was cut off from it).

A bucket made again after it was lost (:meth:`LeaseWatch.rebind`) is watched afresh at once:
the old watcher's consumer went with the old stream, and until the new one has delivered the
bucket the view is not :attr:`~LeaseWatch.current`.

Entries expire in the bucket (its ``max_age`` is the lease) without telling a watcher, so the
view ages them itself: an entry counts for a lease after the stream stored it. Entries that
no member signed (:mod:`segmentstore.tier1.jetstream.lease_entries`), and deletions or purges
(members never delete, they write a signed "left" or "released"), change nothing in the view:
a key keeps its last member's entry until that entry ages out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from nats.errors import Error as NatsError
from nats.js.kv import KV_DEL, KV_PURGE

from segmentstore.cluster.leases import ContainerLease, Membership
from segmentstore.contracts.errors import SegmentStoreError
from segmentstore.tier1.errors import DataLogWriteError
from segmentstore.tier1.jetstream.lease_entries import decode
from segmentstore.tier1.jetstream.nats_errors import describe
from segmentstore.tier1.signing import Signer

log = logging.getLogger(__name__)

NODE = "node."
CONTAINER = "container."
CONSUMER_IDLE_S = 5.0
RESYNC_S = 60.0
_FIRST_DELIVERY_S = 10.0  # how long a new watcher may take to deliver the bucket
_RETRY_MAX_S = 5.0
_SHORT_DELIVERIES_TOLERATED = 5
_IGNORED_LOG_EVERY_S = 60.0


class _ShortDelivery(SegmentStoreError):
    """A new watcher delivered fewer keys than the bucket held when it started (read again;
    never an answer)."""

    code = "short_delivery"
    on_the_wire = False


@dataclass(frozen=True, slots=True)
class _Entry:
    fields: dict[str, Any]
    revision: int
    expires_at: float  # monotonic seconds


class LeaseWatch:
    """The view of ``kv`` (a nats-py key-value bucket whose stream is ``stream``)."""

    def __init__(
        self, js: Any, kv: Any, bucket: str, stream: str, signer: Signer, lease_ms: int
    ) -> None:
        self._js = js
        self._kv = kv
        self._bucket = bucket
        self._stream = stream
        self._signer = signer
        self.lease_ms = lease_ms
        self._entries: dict[str, _Entry] = {}
        self._ready = asyncio.Event()
        self._fresh = asyncio.Event()  # set by rebind(): watch the new bucket now
        self._stale = False  # rebound, and the new bucket not delivered yet
        self._created: datetime | None = None  # when the bucket's stream was made
        self._task: asyncio.Task[None] | None = None
        # Python 3.11's asyncio.wait_for (in nats-py's calls) returns the result of a wait that
        # ended as the task was cancelled, and drops the cancellation: the loops also look here.
        self._stopping = False
        self._ignored_logged: dict[str, float] = {}
        self.consumers_created = 0  # for tests and metrics: one per (re)sync
        self.silent_resyncs = 0  # watchers replaced because they fell silent
        self.failure: str | None = None  # why the last watcher failed, until one works

    async def start(self) -> None:
        """Start watching; returns once the bucket's entries have been delivered once."""
        self._task = asyncio.get_running_loop().create_task(self._run(), name=self._bucket)
        waiting = asyncio.ensure_future(self._ready.wait())
        done, _ = await asyncio.wait(
            [waiting, self._task], timeout=_FIRST_DELIVERY_S, return_when=asyncio.FIRST_COMPLETED
        )
        if waiting not in done:
            waiting.cancel()
            await self.stop()
            raise DataLogWriteError(f"cannot watch {self._bucket}: {self.failure or 'no answer'}")

    async def stop(self) -> None:
        self._stopping = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def rebind(self, kv: Any) -> None:
        """Watch ``kv`` (the bucket, made again) from now on, with a fresh watcher at once."""
        self._kv = kv
        self._stale = True
        self._fresh.set()

    @property
    def current(self) -> bool:
        """Whether the view follows the bucket as it is: delivered by a working watcher of
        the bucket that exists now."""
        return self._ready.is_set() and not self._stale and self.failure is None

    # -- the view ------------------------------------------------------------------------------

    def membership(self) -> Membership:
        """The live nodes, the held leases and the released ones, as last delivered."""
        if not self._ready.is_set():
            raise DataLogWriteError(f"the view of {self._bucket} is not ready")
        now = time.monotonic()
        nodes: dict[str, str] = {}
        leases: dict[int, ContainerLease] = {}
        released: set[int] = set()
        left: set[str] = set()
        for key, entry in self._entries.items():
            if entry.expires_at <= now:
                continue
            fields = entry.fields
            if key.startswith(NODE):
                if fields.get("left"):
                    left.add(key[len(NODE) :])
                elif isinstance(fields.get("url"), str):
                    nodes[key[len(NODE) :]] = fields["url"]
            elif key.startswith(CONTAINER) and key[len(CONTAINER) :].isdigit():
                container = int(key[len(CONTAINER) :])
                if fields.get("released"):
                    released.add(container)
                elif isinstance(fields.get("owner"), str):
                    epoch = fields.get("epoch")
                    leases[container] = ContainerLease(
                        container,
                        fields["owner"],
                        epoch if isinstance(epoch, int) else 0,
                        entry.revision,
                    )
        young = self._created is not None and (
            (datetime.now(UTC) - self._created).total_seconds() < self.lease_ms / 1000
        )
        return Membership(nodes, leases, frozenset(released), young, frozenset(left))

    # -- following the bucket ------------------------------------------------------------------

    async def _run(self) -> None:
        delay = 0.2
        short = 0  # first deliveries in a row that missed keys
        while not self._stopping:
            watcher = None
            self._fresh.clear()
            try:
                watcher = await self._kv.watchall(inactive_threshold=CONSUMER_IDLE_S)
                self.consumers_created += 1
                await self._first_delivery(watcher)
                self.failure = None
                delay = 0.2
                short = 0
                await self._follow(watcher, time.monotonic() + RESYNC_S)
            except _ShortDelivery as error:
                # An entry expired or came between the count and the watcher's start (or
                # nats-py's start-up race): read the bucket again, soon.
                short += 1
                if short < _SHORT_DELIVERIES_TOLERATED:
                    log.debug("%s: reading it again", error)
                    await asyncio.sleep(0.1)
                    continue
                await self._failed(str(error), delay)
                delay = min(delay * 2, _RETRY_MAX_S)
            except (NatsError, TimeoutError, DataLogWriteError) as error:
                await self._failed(describe(error), delay)
                delay = min(delay * 2, _RETRY_MAX_S)
            finally:
                if watcher is not None:
                    await self._delete(watcher)

    async def _failed(self, reason: str, delay: float) -> None:
        if self.failure != reason:
            log.warning("watching %s failed (trying again): %s", self._bucket, reason)
        self.failure = reason
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._fresh.wait(), delay)

    async def _first_delivery(self, watcher: Any) -> None:
        """Take the bucket as the new watcher delivers it, once it delivered every key (a
        watcher may signal the end of its first delivery early: then it is read again)."""
        expected = (await self._kv.status()).values
        fresh: dict[str, _Entry] = {}
        unsigned: set[str] = set()
        seen = 0
        deadline = time.monotonic() + _FIRST_DELIVERY_S
        while True:
            entry = await watcher.updates(timeout=max(0.01, deadline - time.monotonic()))
            if entry is None:
                break
            seen += 1
            if not self._take(fresh, entry):
                unsigned.add(entry.key)
        if seen < expected:
            raise _ShortDelivery(f"a watcher of {self._bucket} delivered {seen} of {expected} keys")
        self._created = (await self._js.stream_info(self._stream)).created
        # A key whose last entry nobody signed keeps the member's entry it replaced.
        for key in unsigned - fresh.keys():
            if (kept := self._entries.get(key)) is not None:
                fresh[key] = kept
        self._entries = fresh
        self._stale = False
        self._ready.set()

    async def _follow(self, watcher: Any, until: float) -> None:
        # Every member renews its entries several times a lease, this node too: a watcher
        # silent for a lease has lost its consumer (JetStream deletes it once this node was
        # out of reach for CONSUMER_IDLE_S, and nats-py's re-subscription after the reconnect
        # never hears of it), so it is replaced now, not at the next resync.
        quiet_s = max(self.lease_ms / 1000, CONSUMER_IDLE_S)
        rebound = asyncio.ensure_future(self._fresh.wait())
        try:
            while (left := until - time.monotonic()) > 0 and not self._stopping:
                update = asyncio.ensure_future(watcher.updates(timeout=min(left, quiet_s)))
                await asyncio.wait([update, rebound], return_when=asyncio.FIRST_COMPLETED)
                if not update.done():
                    update.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await update
                    return  # the bucket was made again: watch the new one
                try:
                    entry = update.result()
                except TimeoutError:
                    if until - time.monotonic() > 0:
                        self.silent_resyncs += 1
                        log.info("the watcher of %s fell silent: watching it afresh", self._bucket)
                    return
                if entry is not None:
                    self._take(self._entries, entry)
        finally:
            rebound.cancel()

    def _take(self, into: dict[str, _Entry], entry: Any) -> bool:
        """Put ``entry`` in ``into`` if a member wrote it; False if no member signed it."""
        key: str = entry.key
        if entry.operation in (KV_DEL, KV_PURGE):
            return False  # expired on a server (a marker), or deleted by a non-member
        current = into.get(key)
        if current is not None and current.revision >= entry.revision:
            return True
        fields = decode(self._signer, self._bucket, key, entry.value, entry.created, self.lease_ms)
        if fields is None:
            self._log_ignored(key)
            return False
        stored: datetime | None = entry.created
        age_s = 0.0 if stored is None else max(0.0, (datetime.now(UTC) - stored).total_seconds())
        expires_at = time.monotonic() + self.lease_ms / 1000 - age_s
        into[key] = _Entry(fields, entry.revision, expires_at)
        return True

    def _log_ignored(self, key: str) -> None:
        now = time.monotonic()
        if now - self._ignored_logged.get(key, -1e9) >= _IGNORED_LOG_EVERY_S:
            self._ignored_logged[key] = now
            log.warning(
                "ignored the entry %s in %s: no member of this cluster signed it (a process"
                " with access to JetStream but without the cluster secret, or a node"
                " configured with another secret)",
                key, self._bucket,
            )  # fmt: skip

    async def _delete(self, watcher: Any) -> None:
        """Stop ``watcher`` and delete its consumer now rather than when JetStream notices
        that nobody listens to it."""
        name = getattr(watcher._sub, "_consumer", None)
        with contextlib.suppress(Exception):
            await watcher.stop()
        if name:
            with contextlib.suppress(Exception):
                await self._js.delete_consumer(self._stream, name)
