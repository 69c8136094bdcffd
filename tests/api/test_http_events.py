"""``:appendEvents`` and ``:readEvents`` over HTTP (docs/api.md, Event framing)."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import httpx
import pytest

Frame = Callable[..., bytes]


def _append_events(http: httpx.Client, name: str, body: bytes, **kw: Any) -> httpx.Response:
    return http.post(f"/v1/segments/{name}:appendEvents", content=body, **kw)


def _read_events(http: httpx.Client, name: str, offset: int, **params: Any) -> httpx.Response:
    return http.get(f"/v1/segments/{name}:readEvents", params={"offset": offset, **params})


def test_append_events_answers_offset_length_and_count(
    http: httpx.Client, segment: str, frame: Frame
) -> None:
    r = _append_events(http, segment, frame(b"a", b"", b"ccc"))
    assert r.status_code == 200
    assert r.json() == {"offset": 0, "length": 28, "events": 3}
    assert _append_events(http, segment, frame(b"d")).json() == {
        "offset": 28,
        "length": 37,
        "events": 1,
    }


def test_read_events_walks_the_segment_with_next_offset(
    http: httpx.Client, segment: str, frame: Frame
) -> None:
    payloads = [bytes([i]) * (i * 10) for i in range(1, 11)]
    _append_events(http, segment, frame(*payloads))
    got = b""
    offset = 0
    while True:
        r = _read_events(http, segment, offset, max_bytes=60)
        if r.status_code == 204:
            assert r.headers["Segment-Next-Offset"] == str(offset)
            break
        assert r.status_code == 200
        assert r.headers["Content-Type"] == "application/octet-stream"
        # Whole events only: the body parses exactly.
        position = 0
        while position < len(r.content):
            kind, length = struct.unpack_from(">ii", r.content, position)
            assert kind == 0
            position += 8 + length
        assert position == len(r.content)
        got += r.content
        offset = int(r.headers["Segment-Next-Offset"])
        assert offset == len(got)
    assert got == frame(*payloads)


def test_read_events_returns_one_whole_event_larger_than_max_bytes(
    http: httpx.Client, segment: str, frame: Frame
) -> None:
    big = b"x" * 5000
    _append_events(http, segment, frame(big, b"small"))
    r = _read_events(http, segment, 0, max_bytes=100)
    assert r.content == frame(big)
    assert r.headers["Segment-Next-Offset"] == str(8 + len(big))


def test_read_events_at_a_non_boundary_is_422(
    http: httpx.Client, segment: str, frame: Frame
) -> None:
    _append_events(http, segment, frame(b"\xff" * 32))
    r = _read_events(http, segment, 4)
    assert r.status_code == 422
    assert r.json()["error"]["code"] == "invalid_events"


def test_events_exactly_once(http: httpx.Client, segment: str, frame: Frame) -> None:
    headers = {"Writer-Id": "producer", "Writer-Seq": "7"}
    first = _append_events(http, segment, frame(b"e"), headers=headers)
    assert first.json() == {"offset": 0, "length": 9, "events": 1}
    again = _append_events(http, segment, frame(b"e"), headers=headers)
    assert again.json() == {"offset": None, "length": 9, "duplicate": True}


@pytest.mark.parametrize(
    "body",
    [
        struct.pack(">ii", 1, 1) + b"x",  # type other than 0
        struct.pack(">ii", 0, -1),  # negative length
        struct.pack(">ii", 0, 10) + b"short",  # length past the end of the body
        struct.pack(">ii", 0, 1) + b"x" + b"\x00\x00\x00",  # ends inside a header
        b"\x00\x00\x00",  # a header cut short
    ],
    ids=["type", "negative", "past-end", "trailing", "cut-header"],
)
def test_bad_framing_is_422_and_appends_nothing(
    http: httpx.Client, segment: str, frame: Frame, body: bytes
) -> None:
    _append_events(http, segment, frame(b"keep"))
    r = _append_events(http, segment, frame(b"good") + body)
    assert r.status_code == 422
    assert r.json()["error"]["code"] == "invalid_events"
    assert http.get(f"/v1/segments/{segment}").json()["length"] == 12


def test_an_empty_event_batch_is_422(http: httpx.Client, segment: str) -> None:
    # Unlike a zero-byte :append (400), a batch must hold at least one event: bad framing.
    r = _append_events(http, segment, b"")
    assert r.status_code == 422
    assert http.get(f"/v1/segments/{segment}").json()["length"] == 0
