"""What each data route declares (:class:`~.data_route.DataRoute`): its parameters, body,
answers and errors, which its handler (:mod:`.data`) goes by and the OpenAPI document lists."""

from __future__ import annotations

from typing import Any

from segmentstore.api.routes.data_route import BINARY, OCTET_STREAM, IntParam, model_answer
from segmentstore.api.schemas import SEGMENT_ERRORS, Appended, EventsAppended, Info
from segmentstore.contracts.errors import (
    BadOffsetError,
    EndOfSegmentError,
    InsufficientStorageError,
    InvalidEventsError,
    OffsetBeyondEndError,
    PayloadTooLargeError,
    SegmentSealedError,
    SegmentTruncatedError,
    ThrottledError,
    WriterSeqMismatchError,
)

EVENT_FRAMING = (
    "Events back to back, each an 8-byte header, a big-endian int32 type (0) and a big-endian"
    " int32 payload length, then the payload (0 to max_append_bytes - 8 bytes). A type other"
    " than 0, a negative length or a length past the end of the body is 422 invalid_events."
)
_RAW_BODY = {
    "content": {OCTET_STREAM: {"schema": BINARY}},
    "required": True,
    "description": "the raw bytes to append: 1 byte to max_append_bytes (8 MiB by default)",
}
_FRAMED_BODY = {
    "content": {OCTET_STREAM: {"schema": {**BINARY, "description": EVENT_FRAMING}}},
    "required": True,
    "description": f"a batch of framed events, appended whole or not at all. {EVENT_FRAMING}",
}
_EXPECTED_OFFSET = IntParam("expected_offset", "append only if the segment's length equals this")
_WRITER_HEADERS: tuple[dict[str, Any], ...] = (
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
        "schema": IntParam("Writer-Seq", "").schema(),
        "description": "exactly-once: applied only if above the last one",
    },
    {
        "name": "Writer-Prev-Seq",
        "in": "header",
        "required": False,
        "schema": IntParam("Writer-Prev-Seq", "").schema(),
        "description": (
            "chained batches: applied only if this is the writer's last applied Writer-Seq on"
            " the segment, else 412 writer_seq_mismatch with last_writer_seq"
        ),
    },
)
_WAIT_MS = IntParam("wait_ms", "how long to wait at the tail (capped at 60000)", default=0)
_READ_ERRORS = (*SEGMENT_ERRORS, SegmentTruncatedError, OffsetBeyondEndError, EndOfSegmentError)
_APPEND_ERRORS = (
    *SEGMENT_ERRORS,
    SegmentSealedError,
    BadOffsetError,
    WriterSeqMismatchError,
    PayloadTooLargeError,
    ThrottledError,
    InsufficientStorageError,
)


def _read_answers(what: str, extra_headers: dict[str, str]) -> dict[int, dict[str, Any]]:
    names = {
        "Segment-Read-Offset": "the offset read from",
        "Segment-Start-Offset": "the segment's start offset (data below it is truncated)",
        "Segment-Length": "the segment's length",
        "Segment-Sealed": "`true` or `false`",
        **extra_headers,
    }
    headers = {k: {"description": v, "schema": {"type": "string"}} for k, v in names.items()}
    return {
        200: {
            "description": what,
            "headers": headers,
            "content": {OCTET_STREAM: {"schema": BINARY}},
        },
        204: {
            "description": "no data came within wait_ms (an unsealed segment's tail)",
            "headers": headers,
        },
    }


APPEND: dict[str, Any] = {
    "operation_id": "appendSegment",
    "summary": "Append bytes atomically",
    "query": (_EXPECTED_OFFSET,),
    "headers": _WRITER_HEADERS,
    "body": _RAW_BODY,
    "answers": {200: model_answer(Appended)},
    "models": (Appended,),
    "errors": _APPEND_ERRORS,
}
APPEND_EVENTS: dict[str, Any] = {
    "operation_id": "appendEvents",
    "summary": "Append a batch of framed events atomically",
    "query": (_EXPECTED_OFFSET,),
    "headers": _WRITER_HEADERS,
    "body": _FRAMED_BODY,
    "answers": {200: model_answer(EventsAppended)},
    "models": (EventsAppended,),
    "errors": (*_APPEND_ERRORS, InvalidEventsError),
}
READ: dict[str, Any] = {
    "operation_id": "readSegment",
    "summary": "Read bytes, waiting at the tail",
    "query": (
        IntParam("offset", "where to read from", required=True),
        IntParam("max_length", "at most this many bytes"),
        _WAIT_MS,
    ),
    "answers": _read_answers("the bytes from `offset` (possibly fewer than asked)", {}),
    "errors": _READ_ERRORS,
}
READ_EVENTS: dict[str, Any] = {
    "operation_id": "readEvents",
    "summary": "Read whole events, waiting at the tail",
    "query": (
        IntParam("offset", "an event boundary", required=True),
        IntParam("max_bytes", "about this many bytes; at least one event"),
        _WAIT_MS,
    ),
    "answers": _read_answers(
        "whole framed events from `offset`, in the framing of `:appendEvents`",
        {"Segment-Next-Offset": "the offset of the next event: the next read's `offset`"},
    ),
    "errors": (*_READ_ERRORS, InvalidEventsError),
}
INFO: dict[str, Any] = {
    "operation_id": "getSegment",
    "summary": "A segment's metadata",
    "answers": {200: model_answer(Info)},
    "models": (Info,),
    "errors": SEGMENT_ERRORS,
}
