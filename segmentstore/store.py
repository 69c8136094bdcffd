"""The embedded segment store: the Python surface of docs/api.md over a fixed set of containers.

It validates arguments (names, offsets, sizes) before anything reaches a container, routes
each segment to its container by Pravega's mapping, and owns the data directory's identity
(``store.json``, which fixes the container count for the life of the data).

:meth:`SegmentStore.start` recovers every container before it returns; a service that must
answer probes meanwhile starts with ``wait_for_recovery=False``: the containers then recover
in the background (``recovering``, and ``503 container_unavailable`` to their requests) and
:meth:`SegmentStore.recovered` waits for them.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Coroutine, Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from types import TracebackType
from typing import Any

from segmentstore.arguments import non_negative, retention_policy, whole_bytes
from segmentstore.containers.container import SegmentContainer
from segmentstore.containers.listing import list_names
from segmentstore.containers.orphaned_tier2 import adopt_orphaned_tier2
from segmentstore.containers.registry import ContainerRegistry
from segmentstore.containers.shared_tier2 import claim_shared_tier2
from segmentstore.containers.tier1_logs import claim_shared_tier1
from segmentstore.contracts.attributes import AttributeUpdate
from segmentstore.contracts.errors import (
    ContainerNotFoundError,
    InvalidArgumentError,
    PayloadTooLargeError,
)
from segmentstore.contracts.events import HEADER as EVENT_HEADER
from segmentstore.contracts.events import count as count_events
from segmentstore.contracts.events import encode
from segmentstore.contracts.mapping import container_of
from segmentstore.contracts.names import transaction_name, validate_int64, validate_segment_name
from segmentstore.contracts.segment_info import AppendResult, EventsRead, SegmentInfo
from segmentstore.data_dir import claim_data_dir, lock_data_dir, unlock_data_dir
from segmentstore.observations import Observations
from segmentstore.reading.whole_events import read_whole_events
from segmentstore.settings import Settings
from segmentstore.tier2 import Tier2Error, open_chunk_storage
from segmentstore.tier2.layout_migration import holds_layout_1

log = logging.getLogger(__name__)


# Enough for the names a node's producers write to again and again. Every name cached pins a
# few small objects where the heap was when it was seen: 65,536 of them, scattered through the
# heap of segments since evicted, kept about 100 MB from going back to the system at 100,000
# segments (see segmentstore bench segments).
@lru_cache(maxsize=4096)
def _route(name: str, containers: int) -> int:
    return container_of(validate_segment_name(name), containers)


class SegmentStore:
    """Open with ``async with SegmentStore.open(data_dir) as store:``.

    ``share``: the containers this process serves when it is one worker of a node of several
    (``segmentstore serve --workers N``); the others are its siblings'. None: all of them, or
    in a cluster those whose leases it wins. A worker does not lock the data directory: its
    node's supervisor holds that lock for all of them (:func:`~.data_dir.lock_data_dir`).
    """

    def __init__(self, settings: Settings, share: frozenset[int] | None = None) -> None:
        self.settings = settings
        self.share = share
        self._count = settings.store.containers
        self.containers: list[SegmentContainer] = []
        # The containers this process serves: all of them, unless a cluster shares them out.
        self.owned: set[int] = set()
        self._started = False
        self._jetstream = settings.tier1.jetstream if settings.tier1.mode == "jetstream" else None
        # Where the parts report their figures (Tier 1 and Tier 2 writes, recoveries).
        self.observations = Observations()

    @classmethod
    def open(
        cls,
        data_dir: str | os.PathLike[str] | None = None,
        *,
        containers: int | None = None,
        tier2: str | None = None,
        tier2_options: dict[str, Any] | None = None,
        settings: Settings | None = None,
        **overrides: dict[str, Any],
    ) -> SegmentStore:
        """A store over ``data_dir``; start it with ``async with`` or :meth:`start`.

        ``tier2`` is a URI (``file://``, ``s3://``, ``hdfs://``; default ``<data_dir>/tier2``)
        and ``tier2_options`` its backend options (S3: ``endpoint_url``, ``region``, ...).
        ``overrides`` are other settings sections, e.g. ``durable_log={"max_frame_bytes": 65536}``.
        """
        base = settings or Settings()
        store_section = dict(overrides.pop("store", {}))
        if data_dir is not None:
            store_section["data_dir"] = Path(data_dir)
        if containers is not None:
            store_section["containers"] = containers
        tier2_section: dict[str, Any] = {}
        if tier2 is not None:
            tier2_section["uri"] = tier2
        if tier2_options is not None:
            tier2_section["options"] = tier2_options
        if tier2_section:
            overrides["tier2"] = tier2_section
        return cls(base.with_overrides(store=store_section, **overrides))

    async def __aenter__(self) -> SegmentStore:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self, *, wait_for_recovery: bool = True) -> None:
        """Claim the data directory, open Tier 2 and recover every container.

        With ``wait_for_recovery=False`` it returns once the containers are ``recovering``, and
        each recovers in the background (:meth:`recovered` waits for all of them).
        """
        data_dir = self.settings.store.data_dir
        uri = self.settings.tier2_uri()
        # First, a second process over the directory stops here (on JetStream it holds nothing;
        # a worker's supervisor holds it for the node).
        locks = self._jetstream is None and self.share is None
        self._data_dir_lock = await asyncio.to_thread(lock_data_dir, data_dir) if locks else None
        storage = None
        try:
            try:
                storage = await asyncio.to_thread(
                    open_chunk_storage, uri, options=self.settings.tier2.backend_options()
                )
            except Tier2Error as error:
                raise InvalidArgumentError(f"cannot open Tier 2 at {uri}: {error}") from error
            if await asyncio.to_thread(holds_layout_1, storage):
                raise InvalidArgumentError(
                    f"Tier 2 at {uri} holds segments in the layout of an earlier version"
                    f" (segments/...): stop every node, run 'segmentstore tier2 migrate {uri}'"
                    " once, then start again"
                )
            if self._jetstream is None:
                await adopt_orphaned_tier2(storage, self.settings)
                await asyncio.to_thread(claim_data_dir, data_dir, self._count)
            else:
                patience_s = self.settings.store.startup_wait_ms / 1000
                await claim_shared_tier1(self._jetstream, self._count, patience_s)
                if self.settings.cluster.enabled:
                    secret = self.settings.cluster.secret_bytes()
                    await claim_shared_tier2(
                        self._jetstream, storage, storage.uri, secret, patience_s
                    )
        except BaseException:
            if storage is not None:
                await asyncio.to_thread(storage.close)
            unlock_data_dir(self._data_dir_lock)
            raise
        registry = self._registry = ContainerRegistry(
            self.settings, storage, self.observations, self.share
        )
        self.cache_manager, self.tier2 = registry.cache_manager, registry.tier2
        self.containers, self.owned = registry.containers, registry.owned
        registry.start()
        self._started = True
        if wait_for_recovery:
            await self.recovered()

    async def recovered(self) -> None:
        """Wait until every container has finished recovering (running, or offline)."""
        await self._registry.recovered()

    async def close(self) -> None:
        """Finish pending operations and release every container. Idempotent."""
        if self._started:
            self._started = False
            await self._registry.close()
            await asyncio.to_thread(self.tier2.storage.close)
            unlock_data_dir(self._data_dir_lock)

    async def restart_container(self, container_id: int) -> SegmentContainer:
        """Stop a container and recover it in place; its epoch is then higher. Restarts of
        one container run one at a time. A read-only container (Tier 1 full) is left serving
        its reads, ``InsufficientStorageError``, while Tier 1 has less than
        ``store.recovery_room_bytes`` free: its recovery would fail for want of room and
        leave it serving nothing."""
        return await self._registry.restart(self.container(container_id))

    async def take_container(self, container_id: int) -> SegmentContainer:
        """Serve a container from now on (its lease was won): recover it, fencing its
        previous owner out of Tier 1."""
        return await self._registry.take(self.container(container_id))

    async def release_container(self, container_id: int) -> None:
        """Stop serving a container (handed over, or its lease lost): finish what is in
        flight, then forget it."""
        await self._registry.release(self.container(container_id))

    def container(self, container_id: int) -> SegmentContainer:
        if not 0 <= container_id < len(self.containers):
            raise ContainerNotFoundError(container_id)
        return self.containers[container_id]

    def container_of(self, name: str) -> int:
        """The id of the container that holds ``name`` (``InvalidNameError`` for a bad name)."""
        return _route(name, self._count)

    def _for(self, name: str) -> SegmentContainer:
        return self.containers[_route(name, self._count)]

    # -- segments -------------------------------------------------------------------------

    async def create_segment(
        self,
        name: str,
        attributes: dict[str, int] | None = None,
        retention: dict[str, int] | None = None,
    ) -> SegmentInfo:
        updates = [
            AttributeUpdate.parse({"key": k, "value": v}) for k, v in (attributes or {}).items()
        ]
        policy = retention_policy(retention)
        return await self._for(name).create_segment(name, {u.key: u.value for u in updates}, policy)

    async def set_retention(self, name: str, retention: dict[str, int] | None) -> SegmentInfo:
        """Replace the retention policy of ``name`` (``time_ms`` and/or ``bytes``; None or
        empty: keep everything). Enforced every ``store.retention_check_interval_ms``."""
        return await self._for(name).set_retention(name, retention_policy(retention))

    async def offset_at(self, name: str, timestamp_ms: int) -> int:
        """An append boundary ``O`` of ``name`` such that every append made at or after
        ``timestamp_ms`` (ms since the epoch) lies at or after ``O``, and at most one time-index
        interval of earlier data lies between ``O`` and the first such append (docs/api.md)."""
        return await self._for(name).offset_at(name, validate_int64("timestamp_ms", timestamp_ms))

    def append(
        self,
        name: str,
        data: bytes | bytearray | memoryview,
        expected_offset: int | None = None,
        *,
        writer_id: str | None = None,
        writer_seq: int | None = None,
        writer_prev_seq: int | None = None,
    ) -> Coroutine[Any, Any, AppendResult]:
        """Append ``data`` to ``name``; await the result. Arguments are checked at once (this
        is a plain function returning the container's coroutine: one coroutine less on the
        hottest path), so bad ones raise at the call rather than at the await.

        Exactly-once: with ``writer_id`` and ``writer_seq``, an append whose ``writer_seq`` is
        not above the last one applied for this writer on ``name`` appends nothing and answers
        a duplicate. ``writer_prev_seq`` chains it: it is applied only right after the
        writer's batch ``writer_prev_seq`` (``WriterSeqMismatchError`` otherwise, naming the
        last one applied), so a writer may keep several in flight and none lands out of order.
        """
        if type(data) is memoryview:
            data = whole_bytes(data)
        size = len(data)
        if size == 0:
            raise InvalidArgumentError("an append needs at least one byte")
        limit = self.settings.store.max_append_bytes
        if size > limit:
            raise PayloadTooLargeError(size, limit)
        if expected_offset is not None:
            non_negative("expected_offset", expected_offset)
        if (writer_id is None) != (writer_seq is None):
            raise InvalidArgumentError("writer_id and writer_seq go together")
        if writer_id is not None:
            if not 0 < len(writer_id) <= 256:
                raise InvalidArgumentError("writer_id must be 1 to 256 characters")
            non_negative("writer_seq", writer_seq)
            if writer_prev_seq is not None:
                non_negative("writer_prev_seq", writer_prev_seq)
                if writer_prev_seq >= writer_seq:  # type: ignore[operator]
                    raise InvalidArgumentError("writer_prev_seq must be below writer_seq")
        elif writer_prev_seq is not None:
            raise InvalidArgumentError("writer_prev_seq needs writer_id and writer_seq")
        container = self.containers[_route(name, self._count)]  # _for, inlined
        return container.append(name, data, expected_offset, writer_id, writer_seq, writer_prev_seq)

    async def read(
        self, name: str, offset: int, max_length: int | None = None, wait_ms: int = 0
    ) -> bytes | memoryview:
        """At most ``max_length`` bytes from ``offset`` (possibly fewer); waits up to
        ``wait_ms`` at the tail of an unsealed segment and returns ``b""`` if nothing came."""
        limits = self.settings.store
        non_negative("offset", offset)
        length = limits.max_read_bytes if max_length is None else max_length
        if non_negative("max_length", length) == 0:
            raise InvalidArgumentError("max_length must be at least 1")
        if not 0 <= non_negative("wait_ms", wait_ms) <= limits.max_wait_ms:
            raise InvalidArgumentError(f"wait_ms must be at most {limits.max_wait_ms}")
        return await self._for(name).read(name, offset, min(length, limits.max_read_bytes), wait_ms)

    async def append_events(
        self,
        name: str,
        events: bytes | bytearray | memoryview | Sequence[bytes],
        expected_offset: int | None = None,
        *,
        writer_id: str | None = None,
        writer_seq: int | None = None,
        writer_prev_seq: int | None = None,
    ) -> AppendResult:
        """Append a batch of events atomically: ``events`` is framed bytes (docs/api.md, Event
        framing) or a sequence of payloads to frame. Bad framing is ``InvalidEventsError``
        and appends nothing."""
        if isinstance(events, memoryview):
            events = whole_bytes(events)
        body = events if isinstance(events, bytes | bytearray | memoryview) else encode(events)
        limit = self.settings.store.max_append_bytes
        if len(body) > limit:
            raise PayloadTooLargeError(len(body), limit)
        count = count_events(body, limit - EVENT_HEADER.size)
        result = await self.append(
            name,
            body,
            expected_offset,
            writer_id=writer_id,
            writer_seq=writer_seq,
            writer_prev_seq=writer_prev_seq,
        )
        if result.duplicate:
            return result
        return AppendResult(result.offset, result.length, events=count)

    async def read_events(
        self, name: str, offset: int, max_bytes: int | None = None, wait_ms: int = 0
    ) -> EventsRead:
        """Whole events from ``offset`` (an event boundary), about ``max_bytes`` of them but
        always at least one when one is there, even if it is larger; none if none came
        within ``wait_ms``."""
        max_append = self.settings.store.max_append_bytes
        return await read_whole_events(self, name, offset, max_bytes, wait_ms, max_append)

    async def seal(self, name: str) -> SegmentInfo:
        return await self._for(name).seal(name)

    async def truncate(self, name: str, offset: int) -> SegmentInfo:
        return await self._for(name).truncate(name, non_negative("offset", offset))

    async def merge(self, target: str, source: str) -> AppendResult:
        container, source_container = self._for(target), self._for(source)
        if source_container is not container:
            # As in Pravega, a missing segment is the answer before the container rule.
            await container.get_info(target)
            await source_container.get_info(source)
            raise InvalidArgumentError(
                f"{source!r} and {target!r} live in different containers; only a transaction"
                " (or another segment of the same container) can be merged"
            )
        return await container.merge(target, source)

    async def delete_segment(self, name: str) -> None:
        await self._for(name).delete_segment(name)

    async def begin_transaction(self, name: str) -> str:
        """Create and return a transaction segment of ``name``; commit with :meth:`merge`."""
        await self._for(name).get_info(name)
        transaction = transaction_name(name)
        await self._for(transaction).create_segment(transaction)
        return transaction

    async def get_info(self, name: str) -> SegmentInfo:
        return await self._for(name).get_info(name)

    async def get_attributes(self, name: str) -> dict[str, int]:
        return await self._for(name).get_attributes(name)

    async def update_attributes(
        self, name: str, updates: Iterable[AttributeUpdate | dict[str, Any]]
    ) -> dict[str, int]:
        parsed = [AttributeUpdate.parse(u) for u in updates]
        if not parsed:
            raise InvalidArgumentError("at least one attribute update is needed")
        return await self._for(name).update_attributes(name, parsed)

    async def list_segments(
        self, prefix: str = "", *, after: str | None = None, limit: int | None = None
    ) -> list[str]:
        """Segment names starting with ``prefix``, sorted by code point, after ``after``:
        the active ones, and the inactive ones from Tier 2's manifests (only as many of those
        are read as the page needs). In a cluster, or a worker of a node, the names of the
        containers this process holds, all of which must be running (a page missing a
        recovering container's names would be wrong)."""
        if limit is not None:
            non_negative("limit", limit)
        return await list_names(
            self.containers,
            self.owned,
            self._for,
            self.tier2,
            prefix=prefix,
            after=after,
            limit=limit,
            shared_out=self.settings.cluster.enabled or self.share is not None,
        )
