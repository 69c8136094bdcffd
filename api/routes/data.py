"""Segment data: ``:append``, ``:read``, ``:appendEvents``, ``:readEvents``.

Bodies are raw bytes taken whole with ``request.body()`` (the body-limit middleware has
already capped them); answers are raw bytes too. Reads carry the segment's state in headers,
taken just after the read, so a client never needs a second request to know where it stands.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response

from segmentstore.api.append_path import append_answer, parse_options
from segmentstore.api.metrics import Metrics
from segmentstore.api.schemas import Appended, EventsAppended, error_responses
from segmentstore.store import SegmentStore

OCTET_STREAM = "application/octet-stream"
_BINARY = {"schema": {"type": "string", "format": "binary"}}
_OPTIONAL_INT = {"anyOf": [{"type": "integer"}, {"type": "null"}]}
# The appends take their optional parameters from the request themselves (see
# ``api.append_path``) and describe them here, so that the schema stays what the route does.
EVENT_FRAMING = (
    "Events back to back, each an 8-byte header, a big-endian int32 type (0) and a big-endian"
    " int32 payload length, then the payload (0 to max_append_bytes - 8 bytes). A type other"
    " than 0, a negative length or a length past the end of the body is 422 invalid_events."
)
_RAW_BODY = {
    "content": {OCTET_STREAM: _BINARY},
    "required": True,
    "description": "the raw bytes to append: 1 byte to max_append_bytes (8 MiB by default)",
}
_FRAMED_BODY = {
    "content": {OCTET_STREAM: {"schema": {**_BINARY["schema"], "description": EVENT_FRAMING}}},
    "required": True,
    "description": f"a batch of framed events, appended whole or not at all. {EVENT_FRAMING}",
}
_APPEND_PARAMETERS: list[dict[str, Any]] = [
    {
        "name": "expected_offset",
        "in": "query",
        "required": False,
        "schema": _OPTIONAL_INT,
        "description": "append only if the segment's length equals this",
    },
    {
        "name": "Writer-Id",
        "in": "header",
        "required": False,
        "schema": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "description": "exactly-once: the writer's identity",
    },
    {
        "name": "Writer-Seq",
        "in": "header",
        "required": False,
        "schema": _OPTIONAL_INT,
        "description": "exactly-once: applied only if above the last one",
    },
    {
        "name": "Writer-Prev-Seq",
        "in": "header",
        "required": False,
        "schema": _OPTIONAL_INT,
        "description": (
            "chained batches: applied only if this is the writer's last applied Writer-Seq on"
            " the segment, else 412 writer_seq_mismatch with last_writer_seq"
        ),
    },
]
APPEND_SCHEMA: dict[str, Any] = {"requestBody": _RAW_BODY, "parameters": _APPEND_PARAMETERS}
EVENTS_SCHEMA: dict[str, Any] = {"requestBody": _FRAMED_BODY, "parameters": _APPEND_PARAMETERS}


def _read_headers(description: str) -> dict[str, Any]:
    names = {
        "Segment-Read-Offset": "the offset read from",
        "Segment-Start-Offset": "the segment's start offset (data below it is truncated)",
        "Segment-Length": "the segment's length",
        "Segment-Sealed": "`true` or `false`",
    }
    return {
        "description": description,
        "headers": {k: {"description": v, "schema": {"type": "string"}} for k, v in names.items()},
    }


def _read_responses(
    what: str, extra_headers: dict[str, str], *errors: int
) -> dict[int | str, dict[str, Any]]:
    ok = _read_headers(what)
    ok["content"] = {OCTET_STREAM: _BINARY}
    none = _read_headers("no data came within wait_ms (an unsealed segment's tail)")
    for entry in (ok, none):
        for name, text in extra_headers.items():
            entry["headers"][name] = {"description": text, "schema": {"type": "string"}}
    return {200: ok, 204: none, **error_responses(400, 404, 410, 416, 503, *errors)}


WaitMs = Annotated[int, Query(description="how long to wait at the tail (capped at 60000)")]


def data_router(store: SegmentStore, metrics: Metrics) -> APIRouter:
    router = APIRouter(prefix="/v1/segments", tags=["data"])
    limits = store.settings.store

    async def _segment_headers(name: str, offset: int) -> dict[str, str]:
        info = await store.get_info(name)
        return {
            "Segment-Read-Offset": str(offset),
            "Segment-Start-Offset": str(info.start_offset),
            "Segment-Length": str(info.length),
            "Segment-Sealed": "true" if info.sealed else "false",
        }

    def _wait(wait_ms: int) -> int:
        # "cap 60000": a longer wait is shortened, like max_length; a negative one is refused
        # by the store.
        return min(wait_ms, limits.max_wait_ms)

    @router.post(
        "/{name:path}:append",
        operation_id="appendSegment",
        response_model=Appended,
        openapi_extra=APPEND_SCHEMA,
        responses=error_responses(400, 404, 409, 412, 413, 429, 503, 507),
        summary="Append bytes atomically",
    )
    async def append(name: str, request: Request) -> Response:
        # Served by api.append_path.AppendFastPath in the app; this route documents it.
        options = parse_options(request.scope["query_string"], request.scope["headers"])
        body = await request.body()
        return JSONResponse(await append_answer(store, metrics, name, body, options, False))

    @router.get(
        "/{name:path}:read",
        operation_id="readSegment",
        response_class=Response,
        responses=_read_responses("the bytes from `offset` (possibly fewer than asked)", {}),
        summary="Read bytes, waiting at the tail",
    )
    async def read(
        name: str,
        offset: Annotated[int, Query(description="where to read from")],
        max_length: Annotated[int | None, Query(description="at most this many bytes")] = None,
        wait_ms: WaitMs = 0,
    ) -> Response:
        data = await store.read(name, offset, max_length, _wait(wait_ms))
        headers = await _segment_headers(name, offset)
        if not data:
            return Response(status_code=204, headers=headers)
        # A memoryview may point into the cache, whose block can be reused once this
        # coroutine yields: the server may still be sending it then.
        content = data if isinstance(data, bytes) else bytes(data)
        return Response(content=content, media_type=OCTET_STREAM, headers=headers)

    @router.post(
        "/{name:path}:appendEvents",
        operation_id="appendEvents",
        response_model=EventsAppended,
        openapi_extra=EVENTS_SCHEMA,
        responses=error_responses(400, 404, 409, 412, 413, 422, 429, 503, 507),
        summary="Append a batch of framed events atomically",
    )
    async def append_events(name: str, request: Request) -> Response:
        # Served by api.append_path.AppendFastPath in the app; this route documents it.
        options = parse_options(request.scope["query_string"], request.scope["headers"])
        body = await request.body()
        return JSONResponse(await append_answer(store, metrics, name, body, options, True))

    @router.get(
        "/{name:path}:readEvents",
        operation_id="readEvents",
        response_class=Response,
        responses=_read_responses(
            "whole framed events from `offset`, in the framing of `:appendEvents`",
            {"Segment-Next-Offset": "the offset of the next event: the next read's `offset`"},
            422,
        ),
        summary="Read whole events, waiting at the tail",
    )
    async def read_events(
        name: str,
        offset: Annotated[int, Query(description="an event boundary")],
        max_bytes: Annotated[
            int | None, Query(description="about this many bytes; at least one event")
        ] = None,
        wait_ms: WaitMs = 0,
    ) -> Response:
        result = await store.read_events(name, offset, max_bytes, _wait(wait_ms))
        headers = await _segment_headers(name, offset)
        headers["Segment-Next-Offset"] = str(result.next_offset)
        if not result.data:
            return Response(status_code=204, headers=headers)
        return Response(content=result.data, media_type=OCTET_STREAM, headers=headers)

    return router
