"""The asyncio client: :class:`AsyncSegmentStoreClient`, the same methods as
:class:`~segmentstore.client.SegmentStoreClient`, awaited."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

import httpx

from segmentstore.errors import SegmentStoreError
from segmentstore.metadata.attributes import AttributeUpdate
from segmentstore.segment_info import AppendResult, SegmentInfo

from . import calls
from .calls import Call, Data
from .http1_transport import Http1Transport
from .httpx_transport import HttpxTransport
from .owners import CLUSTER_MAP, OwnerMap
from .results import ContainerState, EventsReadResult, ReadResult, SegmentPage
from .retry import Attempts, RetryPolicy
from .sync_client import DEFAULT_URL

T = TypeVar("T")


class AsyncSegmentStoreClient:
    """A segment store over HTTP for asyncio code; see ``SegmentStoreClient`` for the
    arguments. Requests go over the client's own HTTP/1.1 transport (see
    :mod:`.http1_transport`), at most ``max_connections`` keep-alive connections to each
    server; a ``transport`` of httpx's replaces it (tests, proxies). ``verify`` checks the
    server's certificate for ``https://``: True with the system's CAs, a CA bundle's path,
    or False for none. In a cluster each request goes to the node that holds its segment
    (``route_to_owners``; see :mod:`.owners`)."""

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        *,
        token: str | None = None,
        timeout_s: float = 30.0,
        retry: RetryPolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        max_connections: int = 100,
        verify: bool | str = True,
        route_to_owners: bool = True,
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        # In a cluster, requests go to their container's owner (see .owners).
        self._owners = OwnerMap() if route_to_owners else None
        self._reading_owners = False
        self._retry = retry or RetryPolicy()
        self._http: Http1Transport | HttpxTransport
        if transport is None:
            self._http = Http1Transport(
                base_url,
                headers=headers,
                timeout_s=timeout_s,
                max_connections=max_connections,
                verify=verify,
            )
        else:
            self._http = HttpxTransport(
                base_url,
                headers=headers,
                timeout_s=timeout_s,
                max_connections=max_connections,
                transport=transport,
                verify=verify,
            )

    async def _read_owners(self, owners: OwnerMap) -> None:
        """Read the container map (one reader at a time; the others go on meanwhile)."""
        if self._reading_owners:
            return
        self._reading_owners = True
        try:
            owners.read(await self._http.send(CLUSTER_MAP))
        except (httpx.TransportError, SegmentStoreError):
            owners.read_failed()
        finally:
            self._reading_owners = False

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncSegmentStoreClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def _run(self, call: Call[T], base_url: str | None = None) -> T:
        """Sends ``call`` (to ``base_url`` instead of the client's own, if given; else to
        its container's owner in a cluster) with the retries its retry rule allows."""
        attempts = Attempts(self._retry, call.idempotent)
        owners = self._owners
        while True:
            target = base_url
            if target is None and owners is not None:
                if owners.due():
                    await self._read_owners(owners)
                target = owners.url_for(call)
            try:
                response = await self._http.send(call, target)
            except httpx.TransportError as error:
                if owners is not None:
                    owners.unreachable(target)
                delay = attempts.after_exception(error)
                if delay is None:
                    raise
                await asyncio.sleep(delay)
                continue
            if owners is not None:
                owners.observe(call, response.status_code, response.headers)
            if response.status_code not in call.ok:
                delay = attempts.after_response(response)
                if delay is not None:
                    await asyncio.sleep(delay)
                    continue
            return calls.outcome(call, response)

    # -- segments ---------------------------------------------------------------------------

    async def create_segment(
        self,
        name: str,
        attributes: Mapping[str, int] | None = None,
        retention: Mapping[str, int] | None = None,
    ) -> SegmentInfo:
        return await self._run(calls.create_segment(name, attributes, retention))

    async def get_info(self, name: str) -> SegmentInfo:
        return await self._run(calls.get_info(name))

    async def delete_segment(self, name: str) -> None:
        await self._run(calls.delete_segment(name))

    async def list_page(
        self, prefix: str = "", *, after: str | None = None, limit: int | None = None
    ) -> SegmentPage:
        return await self._run(calls.list_page(prefix, after, limit))

    async def list_segments(
        self, prefix: str = "", *, after: str | None = None, limit: int | None = None
    ) -> list[str]:
        names: list[str] = []
        while limit is None or len(names) < limit:
            page = await self.list_page(
                prefix, after=after, limit=None if limit is None else limit - len(names)
            )
            names += page.segments
            if page.next is None:
                break
            after = page.next
        return names

    async def seal(self, name: str) -> SegmentInfo:
        return await self._run(calls.seal(name))

    async def truncate(self, name: str, offset: int) -> SegmentInfo:
        return await self._run(calls.truncate(name, offset))

    async def merge(self, target: str, source: str) -> AppendResult:
        return await self._run(calls.merge(target, source))

    async def begin_transaction(self, name: str) -> str:
        return await self._run(calls.begin_transaction(name))

    async def get_attributes(self, name: str) -> dict[str, int]:
        return await self._run(calls.get_attributes(name))

    async def update_attributes(
        self, name: str, updates: Iterable[AttributeUpdate | Mapping[str, Any]]
    ) -> dict[str, int]:
        return await self._run(calls.update_attributes(name, updates))

    async def set_retention(self, name: str, retention: Mapping[str, int] | None) -> SegmentInfo:
        """Replace the retention policy (``time_ms`` and/or ``bytes``; None keeps all)."""
        return await self._run(calls.set_retention(name, retention))

    async def offset_at(self, name: str, timestamp_ms: int) -> int:
        return await self._run(calls.offset_at(name, timestamp_ms))

    # -- data -------------------------------------------------------------------------------

    async def append(
        self,
        name: str,
        data: Data,
        expected_offset: int | None = None,
        *,
        writer_id: str | None = None,
        writer_seq: int | None = None,
        writer_prev_seq: int | None = None,
    ) -> AppendResult:
        return await self._run(
            calls.append(name, data, expected_offset, writer_id, writer_seq, writer_prev_seq)
        )

    async def append_events(
        self,
        name: str,
        events: Data | Sequence[bytes],
        expected_offset: int | None = None,
        *,
        writer_id: str | None = None,
        writer_seq: int | None = None,
        writer_prev_seq: int | None = None,
    ) -> AppendResult:
        return await self._run(
            calls.append_events(
                name, events, expected_offset, writer_id, writer_seq, writer_prev_seq
            )
        )

    async def read(
        self, name: str, offset: int, max_length: int | None = None, wait_ms: int = 0
    ) -> ReadResult:
        return await self._run(calls.read(name, offset, max_length, wait_ms))

    async def read_events(
        self, name: str, offset: int, max_bytes: int | None = None, wait_ms: int = 0
    ) -> EventsReadResult:
        return await self._run(calls.read_events(name, offset, max_bytes, wait_ms))

    # -- containers and probes --------------------------------------------------------------

    async def containers(self) -> list[ContainerState]:
        return await self._run(calls.containers())

    async def restart_container(self, container_id: int) -> ContainerState:
        return await self._run(calls.restart_container(container_id))

    async def healthz(self) -> bool:
        return await self._run(calls.healthz())

    async def readyz(self) -> bool:
        return await self._run(calls.readyz())

    async def metrics(self) -> str:
        return await self._run(calls.metrics())
