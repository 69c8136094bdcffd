"""Every route of docs/api.md as a :class:`Call`: the request to send, which answers are
success, how to decode them, and whether a retry is safe. Both clients execute the same
calls, so the sync and async clients cannot drift apart on paths, headers or retry rules.
"""

from __future__ import annotations

import functools
import json as jsonlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar
from urllib.parse import quote, urlencode

import httpx

from segmentstore.contracts.attributes import AttributeUpdate
from segmentstore.contracts.errors import SegmentStoreError
from segmentstore.contracts.events import encode as encode_events
from segmentstore.contracts.segment_info import AppendResult, SegmentInfo

from . import answers
from .errors import error_from_response
from .reply import Answer
from .results import ContainerState, EventsReadResult, ReadResult, SegmentPage

T = TypeVar("T")

OCTET_STREAM = {"Content-Type": "application/octet-stream"}
Data = bytes | bytearray | memoryview


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    method: str
    path: str
    decode: Callable[[Answer], T]
    params: Mapping[str, str | int] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)
    content: bytes | None = None
    json: Any = None
    idempotent: bool = False
    ok: frozenset[int] = frozenset({200})
    # A tail read may legitimately take wait_ms before its first byte.
    extra_timeout_s: float = 0.0
    # What the request is about, for error attributes the wire does not carry.
    context: Mapping[str, Any] = field(default_factory=dict)


@functools.lru_cache(maxsize=4096)  # a producer sends to the same few names again and again
def segment_path(name: str, action: str | None = None) -> str:
    """``/v1/segments/NAME[:action]`` with the name percent-encoded (``#`` as ``%23``).

    ``/`` stays as it is (names are paths); a ``.`` or ``..`` component is encoded too,
    because httpx, like a browser, would otherwise resolve it away and address another name.
    """
    parts = [quote(part, safe="") for part in name.split("/")]
    parts = [part.replace(".", "%2E") if part in (".", "..") else part for part in parts]
    path = "/v1/segments/" + "/".join(parts)
    return f"{path}:{action}" if action else path


def outcome(call: Call[T], response: Answer) -> T:
    """The decoded answer to ``call``; the error it stands for if it is not a success."""
    if response.status_code not in call.ok:
        raise error_from_response(response, call.context)
    try:
        return call.decode(response)
    except (KeyError, TypeError, ValueError) as error:
        raise SegmentStoreError(
            f"unexpected answer to {call.method} {call.path}: HTTP {response.status_code}"
            f" {response.content[:200]!r}"
        ) from error


def query(call: Call[Any]) -> str:
    """The query string of ``call`` (empty when it has no parameters), ``?`` included."""
    if not call.params:
        return ""
    return "?" + urlencode({key: str(value) for key, value in call.params.items()})


def body(call: Call[Any]) -> tuple[bytes | None, Mapping[str, str]]:
    """The bytes to send and the headers that go with them (a JSON body is encoded here)."""
    if call.json is None:
        return call.content, call.headers
    encoded = jsonlib.dumps(call.json, separators=(",", ":")).encode()
    return encoded, {**call.headers, "Content-Type": "application/json"}


def timeout(base: httpx.Timeout, call: Call[Any]) -> httpx.Timeout:
    if not call.extra_timeout_s:
        return base
    read = None if base.read is None else base.read + call.extra_timeout_s
    return httpx.Timeout(connect=base.connect, read=read, write=base.write, pool=base.pool)


# -- segments -----------------------------------------------------------------------------------


def create_segment(
    name: str,
    attributes: Mapping[str, int] | None = None,
    retention: Mapping[str, int] | None = None,
) -> Call[SegmentInfo]:
    body: dict[str, Any] = {}
    if attributes:
        body["attributes"] = dict(attributes)
    if retention:
        body["retention"] = dict(retention)
    # Not idempotent: a retry after a lost 201 would answer 409 segment_exists.
    return Call(
        "PUT",
        segment_path(name),
        answers.info,
        json=body or None,
        ok=frozenset({201}),
        context={"name": name},
    )


def get_info(name: str) -> Call[SegmentInfo]:
    return Call("GET", segment_path(name), answers.info, idempotent=True, context={"name": name})


def delete_segment(name: str) -> Call[None]:
    # Not retried after sending: a retry of a delete that was applied answers 404.
    return Call(
        "DELETE", segment_path(name), answers.nothing, ok=frozenset({204}), context={"name": name}
    )


def list_page(
    prefix: str = "", after: str | None = None, limit: int | None = None
) -> Call[SegmentPage]:
    params: dict[str, str | int] = {"prefix": prefix} if prefix else {}
    if after is not None:
        params["after"] = after
    if limit is not None:
        params["limit"] = limit

    def decode(response: Answer) -> SegmentPage:
        body = jsonlib.loads(response.content)
        return SegmentPage(list(body["segments"]), body["next"])

    return Call("GET", "/v1/segments", decode, params=params, idempotent=True)


def seal(name: str) -> Call[SegmentInfo]:
    return Call(
        "POST", segment_path(name, "seal"), answers.info, idempotent=True, context={"name": name}
    )


def truncate(name: str, offset: int) -> Call[SegmentInfo]:
    # Idempotent: truncating again at the same offset is below the new start, a no-op.
    return Call(
        "POST",
        segment_path(name, "truncate"),
        answers.info,
        json={"offset": offset},
        idempotent=True,
        context={"name": name},
    )


def merge(target: str, source: str) -> Call[AppendResult]:
    return Call(
        "POST",
        segment_path(target, "merge"),
        answers.appended,
        json={"source": source},
        context={"name": target},
    )


def begin_transaction(name: str) -> Call[str]:
    return Call(
        "POST",
        segment_path(name, "beginTransaction"),
        answers.field("transaction"),
        ok=frozenset({201}),
        context={"name": name},
    )


def get_attributes(name: str) -> Call[dict[str, int]]:
    return Call(
        "GET",
        segment_path(name, "attributes"),
        answers.field("attributes"),
        idempotent=True,
        context={"name": name},
    )


def _update_json(update: AttributeUpdate | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(update, AttributeUpdate):
        return {
            "key": update.key,
            "value": update.value,
            "type": str(update.type),
            "compare": update.compare,
        }
    return dict(update)


def update_attributes(
    name: str, updates: Iterable[AttributeUpdate | Mapping[str, Any]]
) -> Call[dict[str, int]]:
    wire = [_update_json(update) for update in updates]
    # Only a batch of plain replaces gives the same result when applied twice.
    idempotent = all(update.get("type", "replace") == "replace" for update in wire)
    return Call(
        "PATCH",
        segment_path(name, "attributes"),
        answers.field("attributes"),
        json={"updates": wire},
        idempotent=idempotent,
        context={"name": name},
    )


def set_retention(name: str, retention: Mapping[str, int] | None) -> Call[SegmentInfo]:
    # Idempotent: setting the same policy again changes nothing.
    return Call(
        "PUT",
        segment_path(name, "retention"),
        answers.info,
        json=dict(retention or {}),
        idempotent=True,
        context={"name": name},
    )


def offset_at(name: str, timestamp_ms: int) -> Call[int]:
    return Call(
        "GET",
        segment_path(name, "offsetAt"),
        answers.field("offset"),
        params={"timestamp_ms": timestamp_ms},
        idempotent=True,
        context={"name": name},
    )


# -- data -------------------------------------------------------------------------------------


def _append_call(
    name: str,
    action: str,
    body: Data,
    expected_offset: int | None,
    writer_id: str | None,
    writer_seq: int | None,
    writer_prev_seq: int | None = None,
) -> Call[AppendResult]:
    headers = dict(OCTET_STREAM)
    if writer_id is not None:
        headers["Writer-Id"] = writer_id
    if writer_seq is not None:
        headers["Writer-Seq"] = str(writer_seq)
    if writer_prev_seq is not None:
        headers["Writer-Prev-Seq"] = str(writer_prev_seq)
    params: dict[str, str | int] = {}
    if expected_offset is not None:
        params["expected_offset"] = expected_offset
    return Call(
        "POST",
        segment_path(name, action),
        answers.appended,
        params=params,
        headers=headers,
        content=body if isinstance(body, bytes) else bytes(body),
        # The store drops a Writer-Seq it has applied, so resending the same one is safe.
        idempotent=writer_id is not None and writer_seq is not None,
        context={"name": name},
    )


def append(
    name: str,
    data: Data,
    expected_offset: int | None = None,
    writer_id: str | None = None,
    writer_seq: int | None = None,
    writer_prev_seq: int | None = None,
) -> Call[AppendResult]:
    return _append_call(
        name, "append", data, expected_offset, writer_id, writer_seq, writer_prev_seq
    )


def append_events(
    name: str,
    events: Data | Sequence[bytes],
    expected_offset: int | None = None,
    writer_id: str | None = None,
    writer_seq: int | None = None,
    writer_prev_seq: int | None = None,
) -> Call[AppendResult]:
    body = events if isinstance(events, bytes | bytearray | memoryview) else encode_events(events)
    return _append_call(
        name, "appendEvents", body, expected_offset, writer_id, writer_seq, writer_prev_seq
    )


def read(
    name: str, offset: int, max_length: int | None = None, wait_ms: int = 0
) -> Call[ReadResult]:
    params: dict[str, str | int] = {"offset": offset}
    if max_length is not None:
        params["max_length"] = max_length
    if wait_ms:
        params["wait_ms"] = wait_ms
    return Call(
        "GET",
        segment_path(name, "read"),
        answers.read,
        params=params,
        idempotent=True,
        ok=frozenset({200, 204}),
        extra_timeout_s=max(0, wait_ms) / 1000,
        context={"name": name},
    )


def read_events(
    name: str, offset: int, max_bytes: int | None = None, wait_ms: int = 0
) -> Call[EventsReadResult]:
    params: dict[str, str | int] = {"offset": offset}
    if max_bytes is not None:
        params["max_bytes"] = max_bytes
    if wait_ms:
        params["wait_ms"] = wait_ms
    return Call(
        "GET",
        segment_path(name, "readEvents"),
        answers.events_read,
        params=params,
        idempotent=True,
        ok=frozenset({200, 204}),
        extra_timeout_s=max(0, wait_ms) / 1000,
        context={"name": name},
    )


# -- containers and probes ----------------------------------------------------------------------


def containers() -> Call[list[ContainerState]]:
    def decode(response: Answer) -> list[ContainerState]:
        return [answers.container(c) for c in jsonlib.loads(response.content)["containers"]]

    return Call("GET", "/v1/containers", decode, idempotent=True)


def restart_container(container_id: int) -> Call[ContainerState]:
    # Not idempotent: each restart is another epoch.
    return Call(
        "POST",
        f"/v1/containers/{container_id}:restart",
        lambda response: answers.container(jsonlib.loads(response.content)),
        context={"container": container_id},
    )


def healthz() -> Call[bool]:
    return Call("GET", "/healthz", lambda response: True, idempotent=True)


def readyz() -> Call[bool]:
    # 503 is an answer here ("not ready"), not a failure to retry.
    return Call(
        "GET",
        "/readyz",
        lambda response: response.status_code == 200,
        idempotent=True,
        ok=frozenset({200, 503}),
    )


def metrics() -> Call[str]:
    return Call(
        "GET",
        "/metrics",
        lambda response: response.content.decode("utf-8", "replace"),
        idempotent=True,
    )
