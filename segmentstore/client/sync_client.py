"""The blocking client: :class:`SegmentStoreClient`, one method per route of docs/api.md."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

import httpx

from segmentstore.metadata.attributes import AttributeUpdate
from segmentstore.segment_info import AppendResult, SegmentInfo

from . import calls
from .calls import Call, Data
from .owners import CLUSTER_MAP, OwnerMap
from .results import ContainerState, EventsReadResult, ReadResult, SegmentPage
from .retry import Attempts, RetryPolicy
from .tls import tls_verification

T = TypeVar("T")

DEFAULT_URL = "http://127.0.0.1:9090"


class SegmentStoreClient:
    """A segment store over HTTP, with the embedded store's method names and errors.

    ``token`` is sent as ``Authorization: Bearer``. ``timeout_s`` bounds each attempt (a tail
    read gets its ``wait_ms`` on top); ``retry`` says how often transient failures are retried
    (see :mod:`segmentstore.client.retry` for which requests are). ``transport`` replaces
    httpx's (tests, proxies). ``verify`` checks an ``https://`` server's certificate: ``True``
    against the system's authorities, a path to a CA bundle (PEM), or ``False`` not at all.
    Use as a context manager or call :meth:`close`.
    """

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        *,
        token: str | None = None,
        timeout_s: float = 30.0,
        retry: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
        verify: bool | str = True,
        route_to_owners: bool = True,
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        # In a cluster, requests go to their container's owner (see .owners).
        self._owners = OwnerMap() if route_to_owners else None
        self._timeout = httpx.Timeout(timeout_s)
        self._retry = retry or RetryPolicy()
        self._http = httpx.Client(
            base_url=base_url,
            headers=headers,
            timeout=self._timeout,
            transport=transport,
            verify=tls_verification(verify),
        )

    def _read_owners(self, owners: OwnerMap) -> None:
        try:
            owners.read(self._http.get(CLUSTER_MAP.path, timeout=self._timeout))
        except httpx.TransportError:
            owners.read_failed()

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> SegmentStoreClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _run(self, call: Call[T]) -> T:
        attempts = Attempts(self._retry, call.idempotent)
        owners = self._owners
        while True:
            target = None
            if owners is not None:
                if owners.due():
                    self._read_owners(owners)
                target = owners.url_for(call)
            try:
                response = self._http.request(
                    call.method,
                    call.path if target is None else target + call.path,
                    params=call.params,
                    headers=call.headers,
                    content=call.content,
                    json=call.json,
                    timeout=calls.timeout(self._timeout, call),
                )
            except httpx.TransportError as error:
                if owners is not None:
                    owners.unreachable(target)
                delay = attempts.after_exception(error)
                if delay is None:
                    raise
                time.sleep(delay)
                continue
            if owners is not None:
                owners.observe(call, response.status_code, response.headers)
            if response.status_code not in call.ok:
                delay = attempts.after_response(response)
                if delay is not None:
                    time.sleep(delay)
                    continue
            return calls.outcome(call, response)

    # -- segments ---------------------------------------------------------------------------

    def create_segment(
        self,
        name: str,
        attributes: Mapping[str, int] | None = None,
        retention: Mapping[str, int] | None = None,
    ) -> SegmentInfo:
        return self._run(calls.create_segment(name, attributes, retention))

    def get_info(self, name: str) -> SegmentInfo:
        return self._run(calls.get_info(name))

    def delete_segment(self, name: str) -> None:
        self._run(calls.delete_segment(name))

    def list_page(
        self, prefix: str = "", *, after: str | None = None, limit: int | None = None
    ) -> SegmentPage:
        """One page of names after ``after`` (the server caps ``limit`` at 1000)."""
        return self._run(calls.list_page(prefix, after, limit))

    def list_segments(
        self, prefix: str = "", *, after: str | None = None, limit: int | None = None
    ) -> list[str]:
        """Every name starting with ``prefix`` after ``after`` (at most ``limit``), in code
        point order, following the pages."""
        names: list[str] = []
        while limit is None or len(names) < limit:
            page = self.list_page(
                prefix, after=after, limit=None if limit is None else limit - len(names)
            )
            names += page.segments
            if page.next is None:
                break
            after = page.next
        return names

    def seal(self, name: str) -> SegmentInfo:
        return self._run(calls.seal(name))

    def truncate(self, name: str, offset: int) -> SegmentInfo:
        return self._run(calls.truncate(name, offset))

    def merge(self, target: str, source: str) -> AppendResult:
        return self._run(calls.merge(target, source))

    def begin_transaction(self, name: str) -> str:
        return self._run(calls.begin_transaction(name))

    def get_attributes(self, name: str) -> dict[str, int]:
        return self._run(calls.get_attributes(name))

    def update_attributes(
        self, name: str, updates: Iterable[AttributeUpdate | Mapping[str, Any]]
    ) -> dict[str, int]:
        """Apply ``updates`` atomically; answers every attribute after them."""
        return self._run(calls.update_attributes(name, updates))

    def set_retention(self, name: str, retention: Mapping[str, int] | None) -> SegmentInfo:
        """Replace the retention policy (``time_ms`` and/or ``bytes``; None keeps all)."""
        return self._run(calls.set_retention(name, retention))

    def offset_at(self, name: str, timestamp_ms: int) -> int:
        return self._run(calls.offset_at(name, timestamp_ms))

    # -- data -------------------------------------------------------------------------------

    def append(
        self,
        name: str,
        data: Data,
        expected_offset: int | None = None,
        *,
        writer_id: str | None = None,
        writer_seq: int | None = None,
        writer_prev_seq: int | None = None,
    ) -> AppendResult:
        """Append ``data`` atomically. With ``writer_id`` and ``writer_seq`` the append is
        exactly-once and retried after transient failures; an answer with ``duplicate``
        means this sequence number was applied before (by an earlier attempt, perhaps).
        ``writer_prev_seq`` chains it on the writer's previous append: applied only right
        after that one, else ``WriterSeqMismatchError`` with the number the store has."""
        return self._run(
            calls.append(name, data, expected_offset, writer_id, writer_seq, writer_prev_seq)
        )

    def append_events(
        self,
        name: str,
        events: Data | Sequence[bytes],
        expected_offset: int | None = None,
        *,
        writer_id: str | None = None,
        writer_seq: int | None = None,
        writer_prev_seq: int | None = None,
    ) -> AppendResult:
        """Append a batch of events: framed bytes, or payloads that the client frames."""
        return self._run(
            calls.append_events(
                name, events, expected_offset, writer_id, writer_seq, writer_prev_seq
            )
        )

    def read(
        self, name: str, offset: int, max_length: int | None = None, wait_ms: int = 0
    ) -> ReadResult:
        return self._run(calls.read(name, offset, max_length, wait_ms))

    def read_events(
        self, name: str, offset: int, max_bytes: int | None = None, wait_ms: int = 0
    ) -> EventsReadResult:
        return self._run(calls.read_events(name, offset, max_bytes, wait_ms))

    # -- containers and probes --------------------------------------------------------------

    def containers(self) -> list[ContainerState]:
        return self._run(calls.containers())

    def restart_container(self, container_id: int) -> ContainerState:
        return self._run(calls.restart_container(container_id))

    def healthz(self) -> bool:
        return self._run(calls.healthz())

    def readyz(self) -> bool:
        return self._run(calls.readyz())

    def metrics(self) -> str:
        return self._run(calls.metrics())
