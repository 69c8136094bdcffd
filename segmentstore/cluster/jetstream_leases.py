"""Cluster leases in a JetStream key-value bucket: ``<prefix>-cluster``.

Keys ``node.<id>`` and ``container.<n>``, each value a member's signed entry
(:mod:`segmentstore.tier1.jetstream.lease_entries`). The bucket's ``max_age`` is the lease: an
entry its holder stops rewriting disappears by itself, so a dead node and its containers'
leases expire without anyone deleting them. Taking, renewing and releasing a container lease
are compare-and-sets on the key's last revision, decided by the stream's leader.

Reads come from the node's :class:`~.lease_watch.LeaseWatch`, a view pushed by one long-lived
watcher. Entries nobody in the cluster signed are ignored in the view, and a compare-and-set
that finds one writes over it as if the key were free, so a process with access to the
bucket but without the secret can neither join nor hold a container.

The bucket's age limit is set once, by the first node that creates it; every node then uses
the bucket's figure, so nodes configured with different lease times still agree.

A bucket that is lost (its stream deleted by someone with access to JetStream, or lost with
the servers' storage) is made again by the first call of a member that finds it missing, with
the same figure, and that call is tried once more: the members then write their entries
again on their next tick (a node's lease, and each container lease whose holder still opened
it at the same Tier 1 epoch), so the cluster carries on without a restart. A purged bucket
needs nothing: its entries are written again the same way.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from nats.aio.client import Client
from nats.errors import Error as NatsError
from nats.errors import NoRespondersError
from nats.js.api import KeyValueConfig, StorageType
from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError, NoStreamResponseError
from nats.js.errors import NotFoundError as JsNotFoundError
from nats.js.kv import KV_DEL, KV_OP, KV_PURGE

from segmentstore.cluster.lease_watch import CONTAINER, NODE, LeaseWatch
from segmentstore.cluster.leases import BackendUsage, ContainerLease, LeaseStore, Membership
from segmentstore.tier1.errors import DataLogClosedError, DataLogWriteError
from segmentstore.tier1.jetstream.lease_entries import decode, encode
from segmentstore.tier1.jetstream.log import connect_or_raise, epoch_bucket, key_value_bucket
from segmentstore.tier1.jetstream.nats_errors import describe
from segmentstore.tier1.jetstream.options import JetStreamOptions
from segmentstore.tier1.signing import Signer

log = logging.getLogger(__name__)

T = TypeVar("T")

_TAKE_BACK_TRIES = 5
_STREAM_LIST_PAGE = 256
_IMPOSTOR_LOG_EVERY_S = 60.0  # what JetStream answers a stream listing with, at most


class JetStreamLeases(LeaseStore):
    """The leases of the deployment ``options`` names, signed with ``signer``."""

    def __init__(self, options: JetStreamOptions, lease_ms: int, signer: Signer) -> None:
        self._options = options
        self._lease_ms = lease_ms
        self._signer = signer
        self._client: Client | None = None
        self._js: Any = None
        self._bucket: Any = None
        self._epochs: Any = None
        self._watch: LeaseWatch | None = None
        self.recreated = 0  # times this node made the bucket again (for tests and logs)
        self._highest_revision = 0  # of this node's own writes: a lower one is a new bucket
        self._impostor_logged_at = -1e9

    @property
    def lease_ms(self) -> int:
        return self._lease_ms

    @property
    def bucket_name(self) -> str:
        return f"{self._options.stream_prefix}-cluster"

    @property
    def stream_name(self) -> str:
        return f"KV_{self.bucket_name}"

    @property
    def watch(self) -> LeaseWatch | None:
        return self._watch

    async def open(self) -> None:
        client = await connect_or_raise(self._options, f"segmentstore {self.bucket_name}")
        try:
            js = client.jetstream(timeout=self._options.ack_timeout_ms / 1000)
            self._bucket = await self._open_bucket(js)
            self._epochs = await epoch_bucket(js, self._options)
            self._js = js
            watch = LeaseWatch(
                js, self._bucket, self.bucket_name, self.stream_name, self._signer, self._lease_ms
            )
            await watch.start()
        except BaseException as error:
            with contextlib.suppress(Exception):
                await client.close()
            if isinstance(error, NatsError | TimeoutError):
                raise DataLogWriteError(
                    f"cannot open {self.bucket_name}: {describe(error)}"
                ) from error
            raise
        self._client, self._watch = client, watch

    async def _open_bucket(self, js: Any) -> Any:
        bucket = await key_value_bucket(
            js,
            KeyValueConfig(
                bucket=self.bucket_name,
                history=1,
                ttl=self._lease_ms / 1000,
                storage=StorageType.FILE,
                replicas=self._options.replicas,
                direct=False,  # reads from the leader: a follower's may be behind
            ),
        )
        status = await bucket.status()
        bucket_ms = round((status.ttl or 0) * 1000)
        if bucket_ms and bucket_ms != self._lease_ms:
            log.warning(
                "the cluster's leases last %d ms (set when %s was created), not the %d ms"
                " configured here: using %d ms",
                bucket_ms, self.bucket_name, self._lease_ms, bucket_ms,
            )  # fmt: skip
            self._lease_ms = bucket_ms
        return bucket

    async def close(self) -> None:
        watch, self._watch = self._watch, None
        if watch is not None:
            await watch.stop()
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                await client.close()

    def _kv(self) -> Any:
        if self._client is None:
            raise DataLogClosedError(f"the lease bucket {self.bucket_name} is not open")
        return self._bucket

    def _entry(self, key: str, fields: dict[str, Any]) -> bytes:
        return encode(self._signer, self.bucket_name, key, fields)

    # -- nodes -----------------------------------------------------------------------------

    async def announce(self, node: str, url: str) -> None:
        async def put() -> int:
            revision: int = await self._kv().put(
                NODE + node, self._entry(NODE + node, {"url": url})
            )
            return revision

        self._wrote(await self._call("announce node", put))

    def _wrote(self, revision: int) -> None:
        """A write of this node's was stored at ``revision``. Revisions only grow in a
        bucket: a lower one than before means the bucket was made again (by another node),
        and this node's view must follow the new one."""
        if revision < self._highest_revision:
            log.warning(
                "the lease bucket %s was made again (revision %d after %d): watching it afresh",
                self.bucket_name, revision, self._highest_revision,
            )  # fmt: skip
            if self._watch is not None:
                self._watch.rebind(self._bucket)
        self._highest_revision = revision

    async def withdraw(self, node: str) -> None:
        async def put() -> None:
            await self._kv().put(NODE + node, self._entry(NODE + node, {"left": True}))

        await self._call("withdraw node", put)

    async def read(self) -> Membership:
        # A view, not a decision: every decision taken on it is confirmed by a
        # compare-and-set at the stream's leader.
        if self._watch is None:
            raise DataLogClosedError(f"the lease bucket {self.bucket_name} is not open")
        return self._watch.membership()

    def view_current(self) -> bool:
        return self._watch is not None and self._watch.current

    # -- container leases ------------------------------------------------------------------

    async def acquire(self, container: int, owner: str) -> ContainerLease | None:
        key = _key(container)

        async def take() -> int | None:
            value = self._entry(key, {"owner": owner, "epoch": 0})
            try:
                revision: int = await self._kv().create(key, value)
            except KeyWrongLastSequenceError:
                # Something is there: free only if it is a release, or not a member's.
                fields, last = await self._latest(key)
                if fields is not None and not fields.get("released"):
                    return None
                try:
                    revision = await self._kv().update(key, value, last=last)
                except KeyWrongLastSequenceError:
                    return None
            return revision

        revision = await self._call(f"take the lease of container {container}", take)
        return None if revision is None else ContainerLease(container, owner, 0, revision)

    async def renew(self, lease: ContainerLease, epoch: int) -> ContainerLease | None:
        key = _key(lease.container)

        async def update() -> int | None:
            value = self._entry(key, {"owner": lease.owner, "epoch": epoch})
            try:
                revision: int = await self._kv().update(key, value, last=lease.revision)
            except KeyWrongLastSequenceError:
                return await self._take_back(lease, epoch, value)
            return revision

        revision = await self._call(f"renew the lease of container {lease.container}", update)
        return (
            None
            if revision is None
            else ContainerLease(lease.container, lease.owner, epoch, revision)
        )

    async def _take_back(self, lease: ContainerLease, epoch: int, value: bytes) -> int | None:
        """After a renewal found another revision than its holder's: the lease expired
        (JetStream was out of reach for longer than a lease, say), a member took it, or a
        non-member wrote over it. Taken back, with its new revision, only if no member holds
        it and nobody opened the container meanwhile (its Tier 1 epoch is still the one this
        holder opened it at); None if it is lost. A non-member that keeps writing over it is
        an outage (``DataLogWriteError``), not a loss: its holder keeps it while it can."""
        key = _key(lease.container)
        for _ in range(_TAKE_BACK_TRIES):
            fields, last = await self._latest(key)
            if fields is not None and fields.get("owner") != lease.owner:
                return None
            if not await self._epoch_is(lease.container, epoch):
                return None
            try:
                revision: int = await self._kv().update(key, value, last=last)
            except KeyWrongLastSequenceError:
                continue  # written again meanwhile: look again
            if fields is None and last == 0:
                log.info("took the expired lease of container %d back", lease.container)
            return revision
        raise DataLogWriteError(
            f"the lease of container {lease.container} is being written over by a process"
            f" that is not a member of the cluster ({self.bucket_name})"
        )

    async def _latest(self, key: str) -> tuple[dict[str, Any] | None, int]:
        """The key's last entry at the stream's leader, if a member wrote it (None for none,
        a deletion or someone else's), and its revision (0: no entry at all)."""
        subject = f"$KV.{self.bucket_name}.{key}"
        try:
            message = await self._js.get_msg(self.stream_name, subject=subject, direct=False)
        except JsNotFoundError:
            return None, 0
        headers = message.headers or {}
        if headers.get(KV_OP) in (KV_DEL, KV_PURGE):
            return None, message.seq
        fields = decode(
            self._signer, self.bucket_name, key, message.data, message.time, self._lease_ms
        )
        return fields, message.seq

    async def _epoch_is(self, container: int, epoch: int) -> bool:
        try:
            entry = await self._epochs.get(self._options.epoch_key(container))
        except KeyNotFoundError:
            return epoch == 0
        return epoch > 0 and int((entry.value or b"0").decode()) == epoch

    async def release(self, lease: ContainerLease) -> None:
        key = _key(lease.container)

        async def update() -> None:
            value = self._entry(key, {"owner": lease.owner, "released": True})
            with contextlib.suppress(KeyWrongLastSequenceError):
                await self._kv().update(key, value, last=lease.revision)

        await self._call(f"release the lease of container {lease.container}", update)

    async def usage(self) -> BackendUsage:
        """What this deployment (its stream prefix) has in JetStream: Tier 1's streams and
        the key-value buckets, every consumer of theirs, and their replicas out of service."""
        prefixes = (f"{self._options.stream_prefix}-", f"KV_{self._options.stream_prefix}-")
        streams = consumers = missing = 0
        async with self._translated("count the deployment's streams"):
            offset = 0
            while True:
                page = await self._js.streams_info(offset)
                for info in page:
                    if info.config.name.startswith(prefixes):
                        streams += 1
                        consumers += int(info.state.consumer_count)
                        missing += _replicas_missing(info)
                offset += len(page)
                if len(page) < _STREAM_LIST_PAGE:
                    return BackendUsage(streams, consumers, missing)

    def _log_impostor(self, subjects: list[str] | None) -> None:
        now = time.monotonic()
        if now - self._impostor_logged_at < _IMPOSTOR_LOG_EVERY_S:
            return
        self._impostor_logged_at = now
        log.error(
            "the stream %s is not the cluster's lease bucket (its subjects are %s): no node can"
            " hold a lease until it is deleted, after which the nodes make the bucket again",
            self.stream_name, subjects,
        )  # fmt: skip

    @contextlib.asynccontextmanager
    async def _translated(self, what: str) -> Any:
        try:
            yield
        except (NatsError, TimeoutError) as error:
            raise DataLogWriteError(
                f"cannot {what} in {self.bucket_name}: {describe(error)}"
            ) from error

    async def _call(self, what: str, operation: Callable[[], Awaitable[T]]) -> T:
        """``operation`` on the bucket, its failures ``DataLogWriteError``s; if it failed
        because the bucket is gone, the bucket is made again and ``operation`` tried once
        more."""
        try:
            return await operation()
        except (NatsError, TimeoutError) as error:
            if not _bucket_missing(error) or not await self._recreate_if_gone():
                raise DataLogWriteError(
                    f"cannot {what} in {self.bucket_name}: {describe(error)}"
                ) from error
        async with self._translated(what):
            return await operation()

    async def _recreate_if_gone(self) -> bool:
        """Make the bucket again if its stream no longer exists; whether it was made. A
        stream that exists (a leader being elected, or a stream of the bucket's name that is
        not a key-value bucket, which a person must remove) is left as it is."""
        try:
            info = await self._js.stream_info(self.stream_name)
        except JsNotFoundError:
            info = None
        except (NatsError, TimeoutError):
            return False  # JetStream itself does not answer: nothing to mend from here
        if info is not None:
            if f"$KV.{self.bucket_name}.>" not in (info.config.subjects or []):
                self._log_impostor(info.config.subjects)
            return False
        log.warning(
            "the lease bucket %s is gone (its stream deleted or lost): making it again; every"
            " node writes its leases in it again",
            self.bucket_name,
        )
        try:
            self._bucket = await self._open_bucket(self._js)
        except DataLogWriteError as error:
            log.warning("cannot make the lease bucket %s again: %s", self.bucket_name, error)
            return False
        self.recreated += 1
        if self._watch is not None:
            self._watch.rebind(self._bucket)
        return True


def _key(container: int) -> str:
    return f"{CONTAINER}{container}"


def _bucket_missing(error: BaseException) -> bool:
    """Whether ``error`` is what a call to a bucket whose stream is gone meets: a write that
    no stream takes, or a read of a stream that does not exist."""
    if isinstance(error, NoStreamResponseError | NoRespondersError):
        return True
    return isinstance(error, JsNotFoundError) and getattr(error, "err_code", None) == 10059


def _replicas_missing(info: Any) -> int:
    """How many of a stream's replicas are not in service: its leader (if it has none) and
    each follower that is offline or not current with the leader."""
    cluster = info.cluster
    wanted = int(info.config.num_replicas or 1)
    if cluster is None:
        return 0  # a server that is not clustered: one replica, itself
    serving = 1 if cluster.leader else 0
    serving += sum(1 for peer in cluster.replicas or () if peer.current and not peer.offline)
    return max(0, wanted - serving)
