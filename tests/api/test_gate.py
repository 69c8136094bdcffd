"""The gate (api/gate.py): every request passes the same checks once, on to its route's one
handler.

A segment's life and every kind of refusal (the store's, auth's, the body limit's, the path
check's, a query the handler cannot parse) go through the app as served, to the data routes
and to the routes FastAPI serves alike; each answer is what docs/api.md says, and each
request is counted once in the metrics, under its route. Which handler serves what is
checked apart: no route is served by two.
"""

from __future__ import annotations

import asyncio
import json
import struct
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.routing import Route

from segmentstore import SegmentStore
from segmentstore.api.app import create_app
from segmentstore.api.head import read_head

TOKENS = {"r": "read", "w": "write"}
LIMIT = 4096
EVENT = struct.pack(">ii", 0, 3) + b"abc"
W = {"Authorization": "Bearer w"}
R = {"Authorization": "Bearer r"}
S = "/v1/segments/gate/a"
APPEND = "/v1/segments/{name}:append"


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SegmentStore]:
    async with SegmentStore.open(
        tmp_path / "data", containers=4, store={"max_append_bytes": LIMIT}
    ) as opened:
        yield opened


def _once(seq: int, prev: int | None = None) -> dict[str, str]:
    headers = {**W, "Writer-Id": "x", "Writer-Seq": str(seq)}
    return headers if prev is None else {**headers, "Writer-Prev-Seq": str(prev)}


async def _chunks(size: int) -> AsyncIterator[bytes]:
    yield b"c" * (size // 2)
    yield b"c" * (size - size // 2)


# (method, path, headers, body, status, what the answer must hold: a JSON object's items,
# an error code, or the bytes read)
LIFE: list[tuple[str, str, dict[str, str], Any, int, Any]] = [
    ("PUT", S, W, b"", 201, {"length": 0}),
    ("POST", f"{S}:append", W, b"hello", 200, {"offset": 0, "length": 5}),
    ("POST", f"{S}:append?expected_offset=5", W, b"!", 200, {"offset": 5, "length": 6}),
    ("POST", f"{S}:append?expected_offset=1", W, b"!", 412, "bad_offset"),
    ("POST", f"{S}:append?expected_offset=x", W, b"!", 400, "invalid_argument"),
    ("POST", f"{S}:append?expected_offset=%31", W, b"!", 412, "bad_offset"),
    ("POST", f"{S}:append", W, b"", 400, "invalid_argument"),
    ("POST", f"{S}:append", _once(1), b"a", 200, {"offset": 6, "length": 7}),
    ("POST", f"{S}:append", _once(1), b"a", 200, {"offset": None, "duplicate": True}),
    ("POST", f"{S}:append", _once(3, 2), b"c", 412, "writer_seq_mismatch"),
    ("POST", f"{S}:append", _once(2, 1), b"b", 200, {"offset": 7, "length": 8}),
    ("POST", f"{S}:append", {**W, "Writer-Seq": "ab"}, b"b", 400, "invalid_argument"),
    ("POST", f"{S}:append", W, b"z" * (LIMIT + 1), 413, "payload_too_large"),
    ("POST", f"{S}:append", W, _chunks(LIMIT + 1), 413, "payload_too_large"),  # chunked
    ("POST", f"{S}:append", W, _chunks(2), 200, {"offset": 8, "length": 10}),  # chunked
    ("POST", f"{S}:append", {}, b"z", 401, "unauthorized"),
    ("POST", f"{S}:append", R, b"z", 403, "forbidden"),
    ("POST", f"{S}:append", {"Authorization": "Basic w"}, b"z", 401, "unauthorized"),
    ("POST", f"{S}:appendEvents", W, EVENT * 3, 200, {"offset": 10, "length": 43, "events": 3}),
    ("POST", f"{S}:appendEvents", W, EVENT[:-1], 422, "invalid_events"),
    ("POST", "/v1/segments/gate/nowhere:append", W, b"z", 404, "segment_not_found"),
    ("POST", "/v1/segments/bad%0Aname:append", W, b"z", 400, "invalid_name"),
    ("POST", "/v1/segments/..:append", W, b"z", 400, "invalid_name"),
    ("GET", f"{S}:read?offset=0&max_length=10", R, b"", 200, b"hello!abcc"),
    ("GET", f"{S}:read?offset=2&max_length=3", R, b"", 200, b"llo"),
    ("GET", f"{S}:read?offset=2&max_length=0", R, b"", 400, "invalid_argument"),
    ("GET", f"{S}:read?offset=1000", R, b"", 416, "offset_beyond_end"),
    ("GET", f"{S}:read?offset=43&wait_ms=0", R, b"", 204, b""),
    ("GET", f"{S}:read?offset=99999&wait_ms=99999999", R, b"", 416, "offset_beyond_end"),
    ("GET", f"{S}:read", R, b"", 400, "invalid_argument"),
    ("GET", f"{S}:read?offset=x", R, b"", 400, "invalid_argument"),
    ("GET", f"{S}:read?offset=-1", R, b"", 400, "invalid_argument"),
    ("GET", f"{S}:read?offset=1&offset=2&max_length=1", R, b"", 200, b"l"),  # the last
    ("GET", f"{S}:read?offset=%2B2&max_length=1", R, b"", 200, b"l"),  # escaped: "+2"
    ("GET", f"{S}:read?offset=0", {}, b"", 401, "unauthorized"),
    ("GET", f"{S}:readEvents?offset=10", R, b"", 200, EVENT * 3),
    ("GET", f"{S}:readEvents?offset=12&max_bytes=1", R, b"", 422, "invalid_events"),
    ("GET", f"{S}:readEvents?offset=10&max_length=1", R, b"", 200, EVENT * 3),  # not its own
    ("GET", S, R, b"", 200, {"length": 43, "sealed": False}),
    ("GET", f"{S}?x=1", R, b"", 200, {"length": 43}),
    ("GET", f"{S}:nothing", R, b"", 400, "invalid_argument"),  # an unknown action
    ("GET", "/v1/segments/gate/nowhere", R, b"", 404, "segment_not_found"),
    ("GET", "/v1/segments/", R, b"", 400, "invalid_name"),
    # the routes FastAPI serves pass the same checks
    ("POST", f"{S}:seal", {}, b"", 401, "unauthorized"),
    ("POST", f"{S}:seal", R, b"", 403, "forbidden"),
    ("PATCH", f"{S}:attributes", W, b"{" + b" " * (1 << 20) + b"}", 413, "payload_too_large"),
    ("PUT", "/v1/segments/bad%0Aname", W, b"", 400, "invalid_name"),
    ("POST", f"{S}:seal", W, b"", 200, {"sealed": True}),
    ("POST", f"{S}:append", W, b"late", 409, "segment_sealed"),
    ("GET", f"{S}:read?offset=43", R, b"", 416, "end_of_segment"),
]


def _holds(response: httpx.Response, wanted: Any) -> bool:
    if isinstance(wanted, bytes):
        return response.content == wanted
    body = response.json()
    if isinstance(wanted, str):
        return bool(body["error"]["code"] == wanted)
    return all(body.get(key) == value for key, value in wanted.items())


def _counted(text: str) -> dict[tuple[str, str, str], float]:
    found = {}
    for line in text.splitlines():
        if line.startswith("segmentstore_http_requests_total{"):
            labels, value = line.rsplit(" ", 1)
            parts = dict(p.split("=", 1) for p in labels[labels.index("{") + 1 : -1].split(","))
            key = (parts["method"].strip('"'), parts["route"].strip('"'), parts["status"])
            found[key] = float(value)
    return found


async def test_every_request_passes_the_same_checks_once(store: SegmentStore) -> None:
    app = create_app(store, TOKENS)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        for method, path, headers, body, status, wanted in LIFE:
            answer = await c.request(method, path, headers=headers, content=body)
            assert (answer.status_code, _holds(answer, wanted)) == (status, True), (
                method, path, answer.status_code, answer.content[:200],
            )  # fmt: skip
            if status == 401:
                assert answer.headers["WWW-Authenticate"] == "Bearer"
            if path.startswith(f"{S}:read") and status in (200, 204):
                assert answer.headers["Segment-Read-Offset"].isdigit()
                assert answer.headers["Segment-Sealed"] in ("true", "false")
        counted = _counted((await c.get("/metrics")).text)
    # Each request once, under its route's template, whoever refused or served it.
    assert sum(counted.values()) == len(LIFE)
    assert counted[("POST", APPEND, '"401"')] == 2
    assert counted[("POST", APPEND, '"413"')] == 2
    assert counted[("GET", "/v1/segments/{name}:read", '"204"')] == 1
    assert counted[("POST", "/v1/segments/{name}:seal", '"401"')] == 1


@pytest.mark.parametrize(
    ("method", "path", "query"),
    [
        ("GET", "/v1/segments/gate/tail:read", b"offset=0&wait_ms=60000"),  # a data route
        ("PATCH", "/v1/segments/gate/tail:attributes", b""),  # FastAPI's, its body to come
    ],
)
async def test_a_request_cut_off_by_the_stopping_server_is_answered_503(
    store: SegmentStore, method: str, path: str, query: bytes
) -> None:
    app = create_app(store)
    await store.create_segment("gate/tail")
    sent: list[dict[str, Any]] = []
    never = asyncio.Event()

    async def receive() -> dict[str, Any]:
        await never.wait()  # the body never comes
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": method, "path": path, "raw_path": path.encode(),
             "query_string": query, "headers": [(b"content-length", b"10")]}  # fmt: skip
    # uvicorn cancels what still runs when its graceful shutdown runs out.
    serving = asyncio.create_task(app(scope, receive, send))
    await asyncio.sleep(0.2)
    assert not sent, "the request waits"
    serving.cancel()
    await serving  # answered, not cancelled
    assert sent[0]["status"] == 503
    assert json.loads(sent[1]["body"])["error"]["code"] == "container_unavailable"
    assert (b"retry-after", b"1") in sent[0]["headers"]


def test_each_route_has_one_handler(tmp_path: Path) -> None:
    app = create_app(SegmentStore.open(tmp_path / "never-started"), TOKENS)
    data = {(r.method, r.path_format) for r in app.data_routes.all}  # type: ignore[attr-defined]
    served_by_fastapi = {
        (method, route.path_format)
        for route in app.router.routes
        if isinstance(route, Route)
        for method in route.methods or ()
    }
    assert len(data) == 5
    assert not data & served_by_fastapi
    listed = [
        (method, route.path_format)
        for route in app.state.routes
        if isinstance(route, Route) and route.include_in_schema
        for method in route.methods or ()
        if method != "HEAD"
    ]
    assert len(listed) == len(set(listed)), "a route listed twice"
    operations = [
        (method.upper(), path) for path, ops in app.openapi()["paths"].items() for method in ops
    ]
    assert len(operations) == len(set(operations))
    assert data <= set(operations)


def test_the_data_routes_take_their_requests_and_only_theirs(tmp_path: Path) -> None:
    data = create_app(SegmentStore.open(tmp_path / "never-started")).data_routes  # type: ignore[attr-defined]
    head = read_head([])
    taken = {
        ("POST", "/v1/segments/a/b:append"): (data.append, "a/b"),
        ("POST", "/v1/segments/a:appendEvents"): (data.append_events, "a"),
        ("GET", "/v1/segments/a:read"): (data.read, "a"),
        ("GET", "/v1/segments/a:readEvents"): (data.read_events, "a"),
        ("GET", "/v1/segments/a/b"): (data.info, "a/b"),
        ("GET", "/v1/segments/"): (data.info, ""),
    }
    for (method, path), (route, name) in taken.items():
        request = data.match(method, path, head)
        assert request is not None and (request.route, request.name) == (route, name), path
    left = [
        ("POST", "/v1/segments/a:seal"),
        ("PUT", "/v1/segments/a:append"),
        ("GET", "/v1/segments/a:attributes"),
        ("GET", "/v1/segments/a:append"),
        ("GET", "/v1/segments"),
        ("DELETE", "/v1/segments/a"),
        ("HEAD", "/v1/segments/a"),
        ("GET", "/metrics"),
    ]
    assert [m for m in left if data.match(*m, head) is not None] == []


def test_the_head_is_read_in_one_pass_and_the_first_of_a_repeated_header_counts() -> None:
    head = read_head(
        [
            (b"authorization", b"Bearer a"),
            (b"authorization", b"Bearer b"),
            (b"content-length", b"7"),
            (b"writer-id", b"w"),
            (b"writer-seq", b"3"),
            (b"writer-prev-seq", b"2"),
            (b"x-other", b"?"),
        ]
    )
    assert (head.authorization, head.content_length) == (b"Bearer a", b"7")
    assert (head.writer_id, head.writer_seq, head.writer_prev_seq) == (b"w", b"3", b"2")


def test_an_unknown_query_parameter_of_a_data_route_is_ignored() -> None:
    from segmentstore.api.routes.data_route import IntParam, query_ints

    params = (IntParam("offset", "", required=True), IntParam("wait_ms", "", default=0))
    assert query_ints(b"offset=3&x=y", params) == {"offset": 3}
    assert query_ints(b"offset=3&wait_ms=5", params) == {"offset": 3, "wait_ms": 5}
    assert (
        json.dumps(query_ints(b"wait_ms=1&offset=%2D4", params)) == '{"offset": -4, "wait_ms": 1}'
    )
