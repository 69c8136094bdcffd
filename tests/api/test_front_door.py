"""The front door (api/front_door.py) answers exactly as the app behind it would.

Two apps over one store: one as served, one with its front door taken away, so that every
request goes through FastAPI and the middlewares. The same requests (successes, refusals of
the store, of auth, of the body limit, of validation) go to a segment of each, with the same
history; the answers must be the same, status, headers and body, and so must the metrics each
app counted. A few requests are checked to really be taken by the door.
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from segmentstore import SegmentStore
from segmentstore.api.app import create_app

TOKENS = {"r": "read", "w": "write"}
LIMIT = 4096
EVENT = struct.pack(">ii", 0, 3) + b"abc"
# Fields that tell the two segments' histories apart by time only.
_TIMES = re.compile(rb'"(created_ms|last_modified_ms)":\d+')


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SegmentStore]:
    async with SegmentStore.open(
        tmp_path / "data", containers=4, store={"max_append_bytes": LIMIT}
    ) as opened:
        yield opened


def _requests(name: str) -> list[tuple[str, str, dict[str, str], bytes]]:
    s = f"/v1/segments/{name}"
    w = {"Authorization": "Bearer w"}
    r = {"Authorization": "Bearer r"}

    def once(seq: int, prev: int | None = None) -> dict[str, str]:
        headers = {**w, "Writer-Id": "x", "Writer-Seq": str(seq)}
        return headers if prev is None else {**headers, "Writer-Prev-Seq": str(prev)}

    return [
        ("PUT", s, w, b""),
        ("POST", f"{s}:append", w, b"hello"),
        ("POST", f"{s}:append?expected_offset=5", w, b"!"),
        ("POST", f"{s}:append?expected_offset=1", w, b"!"),  # 412 bad_offset
        ("POST", f"{s}:append?expected_offset=x", w, b"!"),  # 400 (parsed by the append path)
        ("POST", f"{s}:append?expected_offset=%31", w, b"!"),  # escaped: left to the app
        ("POST", f"{s}:append", w, b""),  # 400: an empty append
        ("POST", f"{s}:append", once(1), b"a"),
        ("POST", f"{s}:append", once(1), b"a"),  # duplicate
        ("POST", f"{s}:append", once(3, 2), b"c"),  # 412 writer_seq_mismatch
        ("POST", f"{s}:append", once(2, 1), b"b"),
        ("POST", f"{s}:append", {**w, "Writer-Seq": "abc", "Writer-Id": "x"}, b"b"),
        ("POST", f"{s}:append", w, b"z" * (LIMIT + 1)),  # 413
        ("POST", f"{s}:append", {}, b"z"),  # 401
        ("POST", f"{s}:append", r, b"z"),  # 403
        ("POST", f"{s}:append", {"Authorization": "Basic w"}, b"z"),  # 401
        ("POST", f"{s}:appendEvents", w, EVENT * 3),
        ("POST", f"{s}:appendEvents", w, EVENT[:-1]),  # 422
        ("POST", "/v1/segments/nowhere:append", w, b"z"),  # 404
        ("POST", "/v1/segments/bad%0Aname:append", w, b"z"),  # 400, control character
        ("POST", "/v1/segments/..:append", w, b"z"),  # 400 invalid_name
        ("GET", f"{s}:read?offset=0", r, b""),
        ("GET", f"{s}:read?offset=2&max_length=3", r, b""),
        ("GET", f"{s}:read?offset=2&max_length=0", r, b""),  # 400 from the store
        ("GET", f"{s}:read?offset=1000", r, b""),  # 416
        ("GET", f"{s}:read?offset=9&wait_ms=0", r, b""),
        ("GET", f"{s}:read?offset=99999&wait_ms=99999999", r, b""),
        ("GET", f"{s}:read", r, b""),  # 400: offset is required (FastAPI's words)
        ("GET", f"{s}:read?offset=-1", r, b""),  # left to the app: 400
        ("GET", f"{s}:read?offset=1&offset=2", r, b""),
        ("GET", f"{s}:read?offset=0", {}, b""),  # 401
        ("GET", f"{s}:readEvents?offset=9", r, b""),
        ("GET", f"{s}:readEvents?offset=10&max_bytes=1", r, b""),  # 422: not a boundary
        ("GET", f"{s}:readEvents?offset=0&max_length=1", r, b""),  # unknown parameter
        ("GET", s, r, b""),
        ("GET", f"{s}?x=1", r, b""),
        ("GET", "/v1/segments/nowhere", r, b""),  # 404
        ("POST", f"{s}:seal", w, b""),
        ("POST", f"{s}:append", w, b"late"),  # 409 sealed
        ("GET", f"{s}:read?offset=34", r, b""),  # 416 end_of_segment
        ("GET", s, r, b""),
    ]


def _normal(response: httpx.Response, name: str) -> tuple[int, list[tuple[str, str]], bytes]:
    body = _TIMES.sub(rb'"\1":0', response.content.replace(name.encode(), b"NAME"))
    headers = sorted(
        (k, v.replace(name, "NAME"))
        for k, v in response.headers.multi_items()
        if k != "content-length" or not response.headers.get("content-type", "").endswith("json")
    )
    if response.headers.get("content-type") == "application/json":
        body = json.dumps(json.loads(body), sort_keys=True).encode()
    return response.status_code, headers, body


def _series(text: str) -> dict[str, str]:
    wanted = ("segmentstore_http_requests_total", "segmentstore_append")
    return {
        line.rsplit(" ", 1)[0]: line.rsplit(" ", 1)[1]
        for line in text.splitlines()
        if line.startswith(wanted)
    }


async def test_the_front_door_answers_as_the_app_behind_it(store: SegmentStore) -> None:
    fronted = create_app(store, TOKENS)
    plain = create_app(store, TOKENS)
    plain.front_door = None  # type: ignore[attr-defined]
    transports = (httpx.ASGITransport(app=fronted), httpx.ASGITransport(app=plain))
    async with (
        httpx.AsyncClient(transport=transports[0], base_url="http://t") as door,
        httpx.AsyncClient(transport=transports[1], base_url="http://t") as behind,
    ):
        for (method, path, headers, body), twin in zip(
            _requests("door/a"), _requests("door/b"), strict=True
        ):
            got = await door.request(method, path, headers=headers, content=body)
            want = await behind.request(twin[0], twin[1], headers=twin[2], content=twin[3])
            assert _normal(got, "door/a") == _normal(want, "door/b"), (method, path)
        counted = _series((await door.get("/metrics")).text)
        expected = _series((await behind.get("/metrics")).text)
    assert counted == expected
    assert any('status="412"' in key for key in counted)


def test_the_door_takes_the_plain_data_requests_and_leaves_the_rest(
    tmp_path: Path,
) -> None:
    store = SegmentStore.open(tmp_path / "never-started")
    door = create_app(store, TOKENS).front_door  # type: ignore[attr-defined]

    def scope(method: str, path: str, query: bytes = b"", **headers: str) -> dict[str, object]:
        raw = [(k.lower().replace("_", "-").encode(), v.encode()) for k, v in headers.items()]
        return {"type": "http", "method": method, "path": path, "query_string": query,
                "headers": raw}  # fmt: skip

    w, r = {"authorization": "Bearer w"}, {"authorization": "Bearer r"}
    taken = [
        scope("POST", "/v1/segments/a/b:append", content_length="3", **w),
        scope("POST", "/v1/segments/a:appendEvents", b"expected_offset=4", content_length="8", **w),
        scope("GET", "/v1/segments/a:read", b"offset=0&max_length=9&wait_ms=5", **r),
        scope("GET", "/v1/segments/a:readEvents", b"offset=0", **w),
        scope("GET", "/v1/segments/a/b", **r),
    ]
    left = [
        scope("POST", "/v1/segments/a:append", content_length="3"),  # no token
        scope("POST", "/v1/segments/a:append", content_length="3", **r),  # role too low
        scope("POST", "/v1/segments/a:append", transfer_encoding="chunked", **w),
        scope("POST", "/v1/segments/a:append", content_length=str(10 << 20), **w),  # too large
        scope("POST", "/v1/segments/a:seal", content_length="0", **w),
        scope("GET", "/v1/segments/a:read", b"offset=x", **r),
        scope("GET", "/v1/segments/a:read", **r),
        scope("GET", "/v1/segments/a:attributes", **r),
        scope("GET", "/v1/segments", **r),
        scope("GET", "/v1/segments/", **r),
        scope("DELETE", "/v1/segments/a", **w),
        scope("GET", "/metrics"),
        {**scope("GET", "/v1/segments/a", **r), "headers": [(b"authorization", b"Bearer r")] * 2},
    ]
    assert all(door.take(s) is not None for s in taken)
    assert [s for s in left if door.take(s) is not None] == []
