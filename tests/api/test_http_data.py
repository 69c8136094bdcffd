"""Appends and reads over HTTP: offsets, conditions, exactly-once, headers and tail reads."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from segmentstore import Settings


def _append(http: httpx.Client, name: str, data: bytes, **kwargs: Any) -> httpx.Response:
    return http.post(f"/v1/segments/{name}:append", content=data, **kwargs)


def _read(http: httpx.Client, name: str, offset: int, **params: Any) -> httpx.Response:
    return http.get(f"/v1/segments/{name}:read", params={"offset": offset, **params})


def test_append_answers_offset_and_length(http: httpx.Client, segment: str) -> None:
    first = _append(http, segment, b"hello")
    assert first.status_code == 200
    assert first.json() == {"offset": 0, "length": 5}
    assert _append(http, segment, b", world").json() == {"offset": 5, "length": 12}
    assert _read(http, segment, 0).content == b"hello, world"


def test_append_takes_any_bytes_and_content_type(http: httpx.Client, segment: str) -> None:
    data = bytes(range(256)) * 4
    _append(http, segment, data, headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert _read(http, segment, 0).content == data


def test_conditional_append(http: httpx.Client, segment: str) -> None:
    ok = _append(http, segment, b"ab", params={"expected_offset": 0})
    assert ok.json() == {"offset": 0, "length": 2}
    stale = _append(http, segment, b"cd", params={"expected_offset": 0})
    assert stale.status_code == 412
    error = stale.json()["error"]
    assert error["code"] == "bad_offset"
    assert (error["expected_offset"], error["length"]) == (0, 2)
    assert _append(http, segment, b"cd", params={"expected_offset": 2}).json()["offset"] == 2
    assert http.get(f"/v1/segments/{segment}").json()["length"] == 4


def test_exactly_once_appends(http: httpx.Client, segment: str) -> None:
    def send(data: bytes, writer: str, seq: int) -> httpx.Response:
        return _append(http, segment, data, headers={"Writer-Id": writer, "Writer-Seq": str(seq)})

    assert send(b"one", "w1", 1).json() == {"offset": 0, "length": 3}
    retried = send(b"one", "w1", 1)
    assert retried.status_code == 200
    assert retried.json() == {"offset": None, "length": 3, "duplicate": True}
    assert send(b"zero", "w1", 0).json() == {"offset": None, "length": 3, "duplicate": True}
    assert send(b"two", "w1", 2).json() == {"offset": 3, "length": 6}
    # Another writer has its own sequence.
    assert send(b"x", "w2", 1).json() == {"offset": 6, "length": 7}
    assert _read(http, segment, 0).content == b"onetwox"


def test_chained_appends(http: httpx.Client, segment: str) -> None:
    def send(data: bytes, seq: int, prev: int | None = None) -> httpx.Response:
        headers = {"Writer-Id": "w1", "Writer-Seq": str(seq)}
        if prev is not None:
            headers["Writer-Prev-Seq"] = str(prev)
        return _append(http, segment, data, headers=headers)

    refused = send(b"x", 2, 1)  # this writer has applied nothing yet
    assert refused.status_code == 412
    assert refused.json()["error"] == {
        "code": "writer_seq_mismatch",
        "message": refused.json()["error"]["message"],
        "writer_prev_seq": 1,
        "last_writer_seq": None,
    }
    assert send(b"one", 1).json() == {"offset": 0, "length": 3}
    gap = send(b"three", 3, 2)
    assert gap.status_code == 412 and gap.json()["error"]["last_writer_seq"] == 1
    assert send(b"two", 2, 1).json() == {"offset": 3, "length": 6}
    assert send(b"two", 2, 1).json() == {"offset": None, "length": 6, "duplicate": True}
    assert send(b"three", 3, 2).json() == {"offset": 6, "length": 11}
    events = http.post(
        f"/v1/segments/{segment}:appendEvents",
        content=b"\0\0\0\0\0\0\0\1!",
        headers={"Writer-Id": "w1", "Writer-Seq": "5", "Writer-Prev-Seq": "4"},
    )
    assert events.status_code == 412 and events.json()["error"]["last_writer_seq"] == 3
    bad = send(b"y", 9, 9)
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_argument"
    text = _append(http, segment, b"y", headers={"Writer-Id": "w", "Writer-Seq": "9",
                                                 "Writer-Prev-Seq": "x"})  # fmt: skip
    assert text.status_code == 400 and "Writer-Prev-Seq" in text.json()["error"]["message"]
    assert _read(http, segment, 0).content == b"onetwothree"


def test_read_headers(http: httpx.Client, segment: str) -> None:
    _append(http, segment, b"0123456789")
    r = _read(http, segment, 3, max_length=4)
    assert r.status_code == 200
    assert r.content == b"3456"
    assert r.headers["Content-Type"] == "application/octet-stream"
    assert r.headers["Segment-Read-Offset"] == "3"
    assert r.headers["Segment-Start-Offset"] == "0"
    assert r.headers["Segment-Length"] == "10"
    assert r.headers["Segment-Sealed"] == "false"
    http.post(f"/v1/segments/{segment}:seal")
    assert _read(http, segment, 8).headers["Segment-Sealed"] == "true"


def test_read_at_the_tail_is_204(http: httpx.Client, segment: str) -> None:
    _append(http, segment, b"abc")
    started = time.monotonic()
    r = _read(http, segment, 3, wait_ms=200)
    assert r.status_code == 204 and r.content == b""
    assert time.monotonic() - started >= 0.15
    assert r.headers["Segment-Length"] == "3"
    assert _read(http, segment, 3).status_code == 204  # wait_ms defaults to 0


def test_read_at_the_end_of_a_sealed_segment_is_416_end_of_segment(
    http: httpx.Client, segment: str
) -> None:
    _append(http, segment, b"abc")
    http.post(f"/v1/segments/{segment}:seal")
    r = _read(http, segment, 3, wait_ms=5000)
    assert r.status_code == 416
    assert r.json()["error"]["code"] == "end_of_segment"


def test_read_beyond_the_end_is_416_offset_beyond_end(http: httpx.Client, segment: str) -> None:
    _append(http, segment, b"abc")
    r = _read(http, segment, 4)
    assert r.status_code == 416
    error = r.json()["error"]
    assert (error["code"], error["offset"], error["length"]) == ("offset_beyond_end", 4, 3)


def test_read_below_the_start_is_410_with_the_start_offset(
    http: httpx.Client, segment: str
) -> None:
    _append(http, segment, b"abcdef")
    http.post(f"/v1/segments/{segment}:truncate", json={"offset": 4})
    r = _read(http, segment, 2)
    assert r.status_code == 410
    assert r.json()["error"] == {
        "code": "segment_truncated",
        "message": r.json()["error"]["message"],
        "start_offset": 4,
    }
    ok = _read(http, segment, 4)
    assert ok.content == b"ef" and ok.headers["Segment-Start-Offset"] == "4"


def _later(action: Callable[[], object], delay_s: float = 0.3) -> threading.Timer:
    """Runs ``action`` in a while, from another thread, while this one waits at the tail."""
    timer = threading.Timer(delay_s, action)
    timer.start()
    return timer


def test_a_tail_read_is_woken_by_an_append(http: httpx.Client, segment: str) -> None:
    with httpx.Client(base_url=str(http.base_url), timeout=30) as other:
        timer = _later(lambda: _append(other, segment, b"news"))
        started = time.monotonic()
        r = _read(http, segment, 0, wait_ms=20000)
        timer.join()
    assert r.status_code == 200 and r.content == b"news"
    assert time.monotonic() - started < 10


def test_a_tail_read_ends_416_when_the_segment_is_sealed(http: httpx.Client, segment: str) -> None:
    with httpx.Client(base_url=str(http.base_url), timeout=30) as other:
        timer = _later(lambda: other.post(f"/v1/segments/{segment}:seal"))
        r = _read(http, segment, 0, wait_ms=20000)
        timer.join()
    assert r.status_code == 416 and r.json()["error"]["code"] == "end_of_segment"


def test_a_tail_read_ends_404_when_the_segment_is_deleted(http: httpx.Client, segment: str) -> None:
    with httpx.Client(base_url=str(http.base_url), timeout=30) as other:
        timer = _later(lambda: other.delete(f"/v1/segments/{segment}"))
        r = _read(http, segment, 0, wait_ms=20000)
        timer.join()
    assert r.status_code == 404 and r.json()["error"]["code"] == "segment_not_found"


def test_max_length_and_wait_ms_are_capped_not_refused(http: httpx.Client, segment: str) -> None:
    _append(http, segment, b"abc")
    r = _read(http, segment, 0, max_length=1 << 40, wait_ms=10**9)
    assert r.status_code == 200 and r.content == b"abc"


def test_large_append_and_read_round_trip(http: httpx.Client, segment: str) -> None:
    limit = Settings().store.max_append_bytes  # the default, 8 MiB
    data = bytes(range(251)) * (limit // 251)
    assert _append(http, segment, data).json() == {"offset": 0, "length": len(data)}
    got = _read(http, segment, 0)
    assert got.status_code == 200 and got.content == data


def test_concurrent_appends_never_interleave(http: httpx.Client, segment: str) -> None:
    records = [bytes([i]) * 1000 for i in range(1, 33)]

    def send(record: bytes) -> int:
        with httpx.Client(base_url=str(http.base_url), timeout=30) as client:
            offset = _append(client, segment, record).json()["offset"]
            assert isinstance(offset, int)
            return offset

    with ThreadPoolExecutor(8) as pool:
        offsets = list(pool.map(send, records))
    data = _read(http, segment, 0).content
    assert len(data) == 32_000
    for offset, record in zip(offsets, records, strict=True):
        assert data[offset : offset + 1000] == record
