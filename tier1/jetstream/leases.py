"""Cluster leases in a JetStream key-value bucket: ``<prefix>-cluster``.

Keys ``node.<id>`` (value ``{"url"}``) and ``container.<n>`` (value ``{"owner", "epoch"}``).
The bucket's ``max_age`` is the lease: an entry its holder stops rewriting disappears by
itself, so a dead node and its containers' leases expire without anyone deleting them. Taking
and renewing a container lease are compare-and-sets on the key's last revision.

The bucket's age limit is set once, by the first node that creates it; every node then uses
the bucket's figure, so nodes configured with different lease times still agree.
"""

from __future__ import annotations

import contextlib
import json
import logging
from typing import Any

from nats.aio.client import Client
from nats.errors import Error as NatsError
from nats.js.api import KeyValueConfig, StorageType
from nats.js.errors import BadRequestError, KeyNotFoundError, KeyWrongLastSequenceError
from nats.js.kv import KV_DEL, KV_PURGE

from segmentstore.tier1.errors import DataLogClosedError, DataLogWriteError
from segmentstore.tier1.jetstream.log import connect_or_raise, epoch_bucket, key_value_bucket
from segmentstore.tier1.jetstream.options import JetStreamOptions
from segmentstore.tier1.leases import ContainerLease, LeaseStore, Membership

log = logging.getLogger(__name__)

_NODE = "node."
_CONTAINER = "container."
_READ_TIMEOUT_S = 5.0
_READ_TRIES = 3


class JetStreamLeases(LeaseStore):
    def __init__(self, options: JetStreamOptions, lease_ms: int) -> None:
        self._options = options
        self._lease_ms = lease_ms
        self._client: Client | None = None
        self._bucket: Any = None
        self._epochs: Any = None

    @property
    def lease_ms(self) -> int:
        return self._lease_ms

    @property
    def bucket_name(self) -> str:
        return f"{self._options.stream_prefix}-cluster"

    async def open(self) -> None:
        client = await connect_or_raise(self._options, f"segmentstore {self.bucket_name}")
        try:
            js = client.jetstream(timeout=self._options.ack_timeout_ms / 1000)
            self._bucket = await self._open_bucket(js)
            self._epochs = await epoch_bucket(js, self._options)
        except BaseException as error:
            with contextlib.suppress(Exception):
                await client.close()
            if isinstance(error, NatsError | TimeoutError):
                raise DataLogWriteError(f"cannot open {self.bucket_name}: {error!r}") from error
            raise
        self._client = client

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
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                await client.close()

    def _kv(self) -> Any:
        if self._client is None:
            raise DataLogClosedError(f"the lease bucket {self.bucket_name} is not open")
        return self._bucket

    # -- nodes -----------------------------------------------------------------------------

    async def announce(self, node: str, url: str) -> None:
        async with self._translated("announce node"):
            await self._kv().put(_NODE + node, json.dumps({"url": url}).encode())

    async def withdraw(self, node: str) -> None:
        async with self._translated("withdraw node"):
            await self._kv().delete(_NODE + node)

    async def read(self) -> Membership:
        # A read is a view, not a decision: it may come from any replica, and each replica
        # expires entries on its own clock, so for a moment after an entry expired one read
        # can still show it and the next not. Every decision taken on a view is confirmed by
        # a compare-and-set at the stream's leader. A watcher may also signal the end of the
        # current values before it delivered them all (nats-py's start-up race): a read
        # that saw fewer keys than the bucket holds is done again.
        for _ in range(_READ_TRIES):
            async with self._translated("read the cluster's leases"):
                expected = (await self._kv().status()).values
            membership, seen = await self._read_once()
            if seen >= expected:
                break
        return membership

    async def _read_once(self) -> tuple[Membership, int]:
        seen = 0
        nodes: dict[str, str] = {}
        leases: dict[int, ContainerLease] = {}
        released: set[int] = set()
        async with self._translated("read the cluster's leases"):
            watcher = await self._kv().watchall()
            try:
                while (entry := await watcher.updates(timeout=_READ_TIMEOUT_S)) is not None:
                    seen += 1
                    deleted = entry.operation in (KV_DEL, KV_PURGE)
                    if entry.key.startswith(_CONTAINER):
                        container = int(entry.key[len(_CONTAINER) :])
                        if deleted:
                            released.add(container)
                        else:
                            value = json.loads(entry.value)
                            leases[container] = ContainerLease(
                                container, value["owner"], value["epoch"], entry.revision
                            )
                    elif entry.key.startswith(_NODE) and not deleted:
                        nodes[entry.key[len(_NODE) :]] = json.loads(entry.value)["url"]
            finally:
                with contextlib.suppress(Exception):
                    await watcher.stop()
        return Membership(nodes, leases, frozenset(released)), seen

    # -- container leases ------------------------------------------------------------------

    async def acquire(self, container: int, owner: str) -> ContainerLease | None:
        async with self._translated(f"take the lease of container {container}"):
            try:
                revision = await self._kv().create(_key(container), _value(owner, 0))
            except KeyWrongLastSequenceError:
                return None
        return ContainerLease(container, owner, 0, revision)

    async def renew(self, lease: ContainerLease, epoch: int) -> ContainerLease | None:
        key, value = _key(lease.container), _value(lease.owner, epoch)
        async with self._translated(f"renew the lease of container {lease.container}"):
            try:
                revision = await self._kv().update(key, value, last=lease.revision)
            except KeyWrongLastSequenceError:
                # Expired (JetStream was unreachable for longer than a lease, say) or taken.
                # Taking it back is safe only if nobody opened the container meanwhile: its
                # Tier 1 epoch is still the one this holder opened it at.
                if not await self._epoch_is(lease.container, epoch):
                    return None
                try:
                    revision = await self._kv().create(key, value)
                except KeyWrongLastSequenceError:
                    return None
                log.info("took the expired lease of container %d back", lease.container)
        return ContainerLease(lease.container, lease.owner, epoch, revision)

    async def _epoch_is(self, container: int, epoch: int) -> bool:
        try:
            entry = await self._epochs.get(self._options.epoch_key(container))
        except KeyNotFoundError:
            return epoch == 0
        return epoch > 0 and int((entry.value or b"0").decode()) == epoch

    async def release(self, lease: ContainerLease) -> None:
        async with self._translated(f"release the lease of container {lease.container}"):
            with contextlib.suppress(KeyWrongLastSequenceError, BadRequestError):
                await self._kv().delete(_key(lease.container), last=lease.revision)

    @contextlib.asynccontextmanager
    async def _translated(self, what: str) -> Any:
        try:
            yield
        except (NatsError, TimeoutError) as error:
            raise DataLogWriteError(f"cannot {what} in {self.bucket_name}: {error!r}") from error


def _key(container: int) -> str:
    return f"{_CONTAINER}{container}"


def _value(owner: str, epoch: int) -> bytes:
    return json.dumps({"owner": owner, "epoch": epoch}).encode()
