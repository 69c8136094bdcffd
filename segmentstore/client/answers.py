"""Decoding the store's answers into the client's results, one function per kind of answer
(docs/api.md gives each route's): the calls of :mod:`calls` name theirs."""

from __future__ import annotations

import json as jsonlib
from collections.abc import Callable, Mapping
from typing import Any

from segmentstore.contracts.segment_info import AppendResult, SegmentInfo

from .reply import Answer
from .results import ContainerState, EventsReadResult, ReadResult


def info(response: Answer) -> SegmentInfo:
    body = jsonlib.loads(response.content)
    return SegmentInfo(
        name=body["name"],
        container=body["container"],
        start_offset=body["start_offset"],
        length=body["length"],
        storage_length=body["storage_length"],
        sealed=body["sealed"],
        created_ms=body["created_ms"],
        last_modified_ms=body["last_modified_ms"],
        retention=dict(body["retention"]),
        attributes=dict(body["attributes"]),
    )


def appended(response: Answer) -> AppendResult:
    body = jsonlib.loads(response.content)
    return AppendResult(
        offset=body["offset"],
        length=body["length"],
        duplicate=bool(body.get("duplicate", False)),
        events=body.get("events"),
    )


def _segment_state(response: Answer) -> tuple[int, int, int, bool]:
    headers = response.headers
    return (
        int(headers["Segment-Read-Offset"]),
        int(headers["Segment-Start-Offset"]),
        int(headers["Segment-Length"]),
        headers["Segment-Sealed"] == "true",
    )


def read(response: Answer) -> ReadResult:
    offset, start, length, sealed = _segment_state(response)
    data = response.content if response.status_code == 200 else b""
    return ReadResult(data, offset, start, length, sealed)


def events_read(response: Answer) -> EventsReadResult:
    offset, start, length, sealed = _segment_state(response)
    data = response.content if response.status_code == 200 else b""
    next_offset = int(response.headers["Segment-Next-Offset"])
    return EventsReadResult(data, offset, next_offset, start, length, sealed)


def container(body: Mapping[str, Any]) -> ContainerState:
    return ContainerState(
        id=body["id"],
        epoch=body["epoch"],
        status=body["status"],
        segments=body["segments"],
        tier1_bytes=body["tier1_bytes"],
        tier2_lag_bytes=body["tier2_lag_bytes"],
        last_sequence=body["last_sequence"],
    )


def field(key: str) -> Callable[[Answer], Any]:
    return lambda response: jsonlib.loads(response.content)[key]


def nothing(response: Answer) -> None:
    return None
