"""The asyncio client: :class:`AsyncSegmentStoreClient`, the same methods as
:class:`~segmentstore.client.SegmentStoreClient`, awaited."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

import httpx

from segmentstore.metadata.attributes import AttributeUpdate
from segmentstore.segment_info import AppendResult, SegmentInfo

from . import calls
from .calls import Call, Data
from .results import ContainerState, EventsReadResult, ReadResult, SegmentPage
from .retry import Attempts, RetryPolicy
from .sync_client import DEFAULT_URL
from .tls import tls_verification

T = TypeVar("T")


class AsyncSegmentStoreClient:
    """A segment store over HTTP for asyncio code; see ``SegmentStoreClient`` for the
    arguments. ``max_connections`` bounds the pool (httpx's default is 100)."""

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
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._timeout = httpx.Timeout(timeout_s)
        self._retry = retry or RetryPolicy()
        self._http = httpx.AsyncClient(
            base_url=base_url,
            headers=headers,
            timeout=self._timeout,
            transport=transport,
            limits=httpx.Limits(max_connections=max_connections),
            verify=tls_verification(verify),
        )

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

    async def _run(self, call: Call[T]) -> T:
        attempts = Attempts(self._retry, call.idempotent)
        while True:
            try:
                response = await self._http.request(
                    call.method,
                    call.path,
                    params=call.params,
                    headers=call.headers,
                    content=call.content,
                    json=call.json,
                    timeout=calls.timeout(self._timeout, call),
                )
            except httpx.TransportError as error:
                delay = attempts.after_exception(error)
                if delay is None:
                    raise
                await asyncio.sleep(delay)
                continue
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
    ) -> AppendResult:
        return await self._run(calls.append(name, data, expected_offset, writer_id, writer_seq))

    async def append_events(
        self,
        name: str,
        events: Data | Sequence[bytes],
        expected_offset: int | None = None,
        *,
        writer_id: str | None = None,
        writer_seq: int | None = None,
    ) -> AppendResult:
        return await self._run(
            calls.append_events(name, events, expected_offset, writer_id, writer_seq)
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
