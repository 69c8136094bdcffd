"""Malformed requests of every kind: each gets its documented 4xx and changes nothing.

Each case runs against a segment holding ``abc`` and the attribute ``a = 1``; afterwards the
segment's whole info and the store's list of names must be exactly as before.
"""

from __future__ import annotations

import http.client
import json
import random
import struct
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

MiB = 1 << 20
TOO_BIG = b"x" * (9 * MiB)  # the default max_append_bytes is 8 MiB


def _chunks() -> Iterator[bytes]:
    for _ in range(9):
        yield b"x" * MiB  # no Content-Length: sent chunked, capped while it streams


def _json(text: str) -> dict[str, Any]:
    return {"content": text.encode(), "headers": {"Content-Type": "application/json"}}


BAD_EVENT = struct.pack(">ii", 0, 100) + b"short"

# (id, method, path with {seg} and {new}, httpx keyword arguments, status, code)
CASES: list[tuple[str, str, str, dict[str, Any], int, str]] = [
    # names
    ("empty-name", "PUT", "/v1/segments/", {}, 400, "invalid_name"),
    ("empty-name-get", "GET", "/v1/segments/", {}, 400, "invalid_name"),
    ("dotdot", "PUT", "/v1/segments/%2e%2e/x", {}, 400, "invalid_name"),
    ("dotdot-inner", "PUT", "/v1/segments/a/%2E%2E/b", {}, 400, "invalid_name"),
    ("dot", "PUT", "/v1/segments/%2e/x", {}, 400, "invalid_name"),
    ("double-slash", "PUT", "/v1/segments/a//b", {}, 400, "invalid_name"),
    ("trailing-slash", "PUT", "/v1/segments/{new}/", {}, 400, "invalid_name"),
    ("leading-slash", "PUT", "/v1/segments/%2F{new}", {}, 400, "invalid_name"),
    ("space", "PUT", "/v1/segments/a%20b", {}, 400, "invalid_name"),
    ("nul", "PUT", "/v1/segments/a%00b", {}, 400, "invalid_name"),
    ("bad-utf8", "PUT", "/v1/segments/a%FFb", {}, 400, "invalid_name"),
    ("non-ascii", "PUT", "/v1/segments/%C3%A9t%C3%A9", {}, 400, "invalid_name"),
    ("too-long", "PUT", "/v1/segments/" + "a" * 256, {}, 400, "invalid_name"),
    ("colon", "PUT", "/v1/segments/{new}%3Ax", {}, 400, "invalid_argument"),
    ("dotdot-append", "POST", "/v1/segments/%2e%2e/x:append", {"content": b"x"}, 400,
     "invalid_name"),
    ("dotdot-read", "GET", "/v1/segments/%2e%2e/x:read?offset=0", {}, 400, "invalid_name"),
    # offsets and other query arguments
    ("expected-negative", "POST", "/v1/segments/{seg}:append?expected_offset=-1",
     {"content": b"x"}, 400, "invalid_argument"),
    ("expected-text", "POST", "/v1/segments/{seg}:append?expected_offset=three",
     {"content": b"x"}, 400, "invalid_argument"),
    ("read-negative", "GET", "/v1/segments/{seg}:read?offset=-1", {}, 400, "invalid_argument"),
    ("read-text", "GET", "/v1/segments/{seg}:read?offset=abc", {}, 400, "invalid_argument"),
    ("read-float", "GET", "/v1/segments/{seg}:read?offset=1.5", {}, 400, "invalid_argument"),
    ("read-missing", "GET", "/v1/segments/{seg}:read", {}, 400, "invalid_argument"),
    ("read-huge", "GET", f"/v1/segments/{{seg}}:read?offset={1 << 70}", {}, 400,
     "invalid_argument"),
    ("max-length-zero", "GET", "/v1/segments/{seg}:read?offset=0&max_length=0", {}, 400,
     "invalid_argument"),
    ("max-length-negative", "GET", "/v1/segments/{seg}:read?offset=0&max_length=-5", {}, 400,
     "invalid_argument"),
    ("wait-negative", "GET", "/v1/segments/{seg}:read?offset=0&wait_ms=-1", {}, 400,
     "invalid_argument"),
    ("events-negative", "GET", "/v1/segments/{seg}:readEvents?offset=-1", {}, 400,
     "invalid_argument"),
    ("offset-at-text", "GET", "/v1/segments/{seg}:offsetAt?timestamp_ms=now", {}, 400,
     "invalid_argument"),
    ("list-limit", "GET", "/v1/segments?limit=0", {}, 400, "invalid_argument"),
    # exactly-once headers
    ("seq-text", "POST", "/v1/segments/{seg}:append",
     {"content": b"x", "headers": {"Writer-Id": "w", "Writer-Seq": "one"}}, 400,
     "invalid_argument"),
    ("seq-negative", "POST", "/v1/segments/{seg}:append",
     {"content": b"x", "headers": {"Writer-Id": "w", "Writer-Seq": "-1"}}, 400,
     "invalid_argument"),
    ("writer-without-seq", "POST", "/v1/segments/{seg}:append",
     {"content": b"x", "headers": {"Writer-Id": "w"}}, 400, "invalid_argument"),
    ("seq-without-writer", "POST", "/v1/segments/{seg}:appendEvents",
     {"content": struct.pack(">ii", 0, 0), "headers": {"Writer-Seq": "1"}}, 400,
     "invalid_argument"),
    # raw bodies
    ("empty-append", "POST", "/v1/segments/{seg}:append", {"content": b""}, 400,
     "invalid_argument"),
    ("oversize", "POST", "/v1/segments/{seg}:append", {"content": TOO_BIG}, 413,
     "payload_too_large"),
    ("oversize-chunked", "POST", "/v1/segments/{seg}:append", {"content": _chunks}, 413,
     "payload_too_large"),
    ("oversize-events", "POST", "/v1/segments/{seg}:appendEvents", {"content": TOO_BIG}, 413,
     "payload_too_large"),
    ("bad-framing", "POST", "/v1/segments/{seg}:appendEvents", {"content": BAD_EVENT}, 422,
     "invalid_events"),
    # JSON bodies
    ("create-bad-json", "PUT", "/v1/segments/{new}", _json("{bad"), 400, "invalid_argument"),
    ("create-array", "PUT", "/v1/segments/{new}", _json("[]"), 400, "invalid_argument"),
    ("create-string-value", "PUT", "/v1/segments/{new}", _json('{"attributes": {"a": "5"}}'),
     400, "invalid_argument"),
    ("create-bool-value", "PUT", "/v1/segments/{new}", _json('{"attributes": {"a": true}}'),
     400, "invalid_argument"),
    ("create-big-value", "PUT", "/v1/segments/{new}",
     _json(f'{{"attributes": {{"a": {1 << 64}}}}}'), 400, "invalid_argument"),
    ("create-bad-key", "PUT", "/v1/segments/{new}", _json('{"attributes": {"a b": 1}}'), 400,
     "invalid_argument"),
    ("create-unknown-field", "PUT", "/v1/segments/{new}", _json('{"colour": "red"}'), 400,
     "invalid_argument"),
    ("create-retention-negative", "PUT", "/v1/segments/{new}",
     _json('{"retention": {"bytes": -1}}'), 400, "invalid_argument"),
    ("create-retention-unknown", "PUT", "/v1/segments/{new}",
     _json('{"retention": {"count": 1}}'), 400, "invalid_argument"),
    # The declared type does not matter (curl -d sends a form type); the body does.
    ("create-not-json", "PUT", "/v1/segments/{new}",
     {"content": b"attributes=1", "headers": {"Content-Type": "application/x-www-form-urlencoded"}},
     400, "invalid_argument"),
    ("truncate-no-body", "POST", "/v1/segments/{seg}:truncate", {}, 400, "invalid_argument"),
    ("truncate-bad-json", "POST", "/v1/segments/{seg}:truncate", _json('{"offset": '), 400,
     "invalid_argument"),
    ("truncate-string", "POST", "/v1/segments/{seg}:truncate", {"json": {"offset": "2"}}, 400,
     "invalid_argument"),
    ("truncate-negative", "POST", "/v1/segments/{seg}:truncate", {"json": {"offset": -1}}, 400,
     "invalid_argument"),
    ("merge-no-source", "POST", "/v1/segments/{seg}:merge", {"json": {}}, 400,
     "invalid_argument"),
    ("merge-number", "POST", "/v1/segments/{seg}:merge", {"json": {"source": 5}}, 400,
     "invalid_argument"),
    ("merge-bad-name", "POST", "/v1/segments/{seg}:merge", {"json": {"source": "../x"}}, 400,
     "invalid_name"),
    ("merge-itself", "POST", "/v1/segments/{seg}:merge", {"json": {"source": "{seg}"}}, 400,
     "invalid_argument"),
    ("patch-empty", "PATCH", "/v1/segments/{seg}:attributes", {"json": {"updates": []}}, 400,
     "invalid_argument"),
    ("patch-type", "PATCH", "/v1/segments/{seg}:attributes",
     {"json": {"updates": [{"key": "a", "value": 1, "type": "maximise"}]}}, 400,
     "invalid_argument"),
    ("patch-no-value", "PATCH", "/v1/segments/{seg}:attributes",
     {"json": {"updates": [{"key": "a"}]}}, 400, "invalid_argument"),
    ("patch-bad-key", "PATCH", "/v1/segments/{seg}:attributes",
     {"json": {"updates": [{"key": "", "value": 1}]}}, 400, "invalid_argument"),
    ("patch-long-key", "PATCH", "/v1/segments/{seg}:attributes",
     {"json": {"updates": [{"key": "k" * 65, "value": 1}]}}, 400, "invalid_argument"),
    ("patch-int64", "PATCH", "/v1/segments/{seg}:attributes",
     {"json": {"updates": [{"key": "a", "value": 1 << 63}]}}, 400, "invalid_argument"),
    ("patch-float", "PATCH", "/v1/segments/{seg}:attributes",
     {"json": {"updates": [{"key": "a", "value": 1.5}]}}, 400, "invalid_argument"),
    ("patch-partly-bad", "PATCH", "/v1/segments/{seg}:attributes",
     {"json": {"updates": [{"key": "b", "value": 1}, {"key": "c", "value": "x"}]}}, 400,
     "invalid_argument"),
    ("patch-oversize-chunked", "PATCH", "/v1/segments/{seg}:attributes",
     {"content": _chunks, "headers": {"Content-Type": "application/json"}}, 413,
     "payload_too_large"),
    ("patch-oversize", "PATCH", "/v1/segments/{seg}:attributes",
     _json(json.dumps({"updates": [{"key": "a", "value": 1}] * 80_000})), 413,
     "payload_too_large"),
    # actions and methods
    ("unknown-action", "POST", "/v1/segments/{seg}:explode", {}, 400, "invalid_argument"),
    ("unknown-get-action", "GET", "/v1/segments/{seg}:size", {}, 400, "invalid_argument"),
    ("action-wrong-method", "GET", "/v1/segments/{seg}:append", {}, 400, "invalid_argument"),
    ("put-action", "PUT", "/v1/segments/{seg}:seal", {}, 400, "invalid_argument"),
    ("delete-action", "DELETE", "/v1/segments/{seg}:append", {}, 400, "invalid_argument"),
    ("post-no-action", "POST", "/v1/segments/{seg}", {"content": b"x"}, 400,
     "invalid_argument"),
    ("patch-no-action", "PATCH", "/v1/segments/{seg}", {"json": {}}, 400, "invalid_argument"),
    ("no-route", "GET", "/v1/streams", {}, 404, "not_found"),
    ("wrong-method", "DELETE", "/v1/containers", {}, 405, "method_not_allowed"),
]  # fmt: skip


@pytest.fixture
def prepared(http: httpx.Client, segment: str) -> str:
    http.post(f"/v1/segments/{segment}:append", content=b"abc")
    http.patch(f"/v1/segments/{segment}:attributes", json={"updates": [{"key": "a", "value": 1}]})
    return segment


@pytest.mark.parametrize(
    ("method", "path", "kwargs", "status", "code"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_malformed_requests_are_refused_and_change_nothing(
    http: httpx.Client,
    prepared: str,
    snapshot: Callable[[str], Any],
    method: str,
    path: str,
    kwargs: dict[str, Any],
    status: int,
    code: str,
) -> None:
    before = snapshot(prepared)
    url = path.format(seg=prepared, new=prepared + "-new")
    kwargs = dict(kwargs)
    if callable(kwargs.get("content")):
        kwargs["content"] = kwargs["content"]()
    if "json" in kwargs:
        kwargs["json"] = json.loads(json.dumps(kwargs["json"]).replace("{seg}", prepared))
    r = http.request(method, url, **kwargs)
    assert r.status_code == status, r.text
    assert r.json()["error"]["code"] == code
    if status == 405:
        assert "GET" in r.headers["Allow"]
    assert snapshot(prepared) == before


def test_a_raw_dotdot_path_is_an_invalid_name(live: Any, snapshot: Callable[[str], Any],
                                             prepared: str) -> None:  # fmt: skip
    # httpx removes "../" from URLs; http.client sends the path as written.
    before = snapshot(prepared)
    address = urlsplit(live.url)
    connection = http.client.HTTPConnection(address.hostname or "", address.port, timeout=30)
    try:
        connection.request("PUT", "/v1/segments/../x")
        answer = connection.getresponse()
        assert answer.status == 400
        assert json.loads(answer.read())["error"]["code"] == "invalid_name"
    finally:
        connection.close()
    assert snapshot(prepared) == before


def test_the_connection_stays_usable_after_a_413(http: httpx.Client, prepared: str) -> None:
    assert http.post(f"/v1/segments/{prepared}:append", content=TOO_BIG).status_code == 413
    r = http.post(f"/v1/segments/{prepared}:append", content=b"d")
    assert r.json() == {"offset": 3, "length": 4}


ALPHABET = ["a", "Z", "0", "/", ".", "..", "_", "-", "~", "#", "%23", "%2e", "%2F", "%00", "%FF",
            ":", "%3A", " ", "%20", "\u00e9", "?", "&", "=", "*", "//"]  # fmt: skip
ACTIONS = ["", ":append", ":read", ":seal", ":truncate", ":merge", ":beginTransaction",
           ":attributes", ":appendEvents", ":readEvents", ":offsetAt", ":", "::", ":x"]  # fmt: skip
VALUES = ["0", "-1", "1", "x", "", "1e3", str(1 << 64), "9" * 40, "0x10", " 1"]
BODIES = [b"", b"x", b"{", b"null", b"[]", b'{"offset": 1}', b'{"source": ""}',
          b'{"updates": [{}]}', b"\x00" * 8, struct.pack(">ii", 0, 1) + b"x"]  # fmt: skip


def test_random_requests_never_get_a_500(http: httpx.Client) -> None:
    rng = random.Random(20240607)
    for _ in range(300):
        name = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 6)))
        path = "/v1/segments/" + name.replace("?", "%3F").replace("&", "%26") + rng.choice(ACTIONS)
        params = {
            key: rng.choice(VALUES)
            for key in rng.sample(
                ["offset", "max_length", "wait_ms", "expected_offset", "limit", "timestamp_ms"],
                rng.randint(0, 3),
            )
        }
        params.pop("wait_ms", None)  # a random wait would only slow the test down
        headers = {"Content-Type": rng.choice(["application/json", "application/octet-stream"])}
        if rng.random() < 0.2:
            headers.update({"Writer-Id": "w", "Writer-Seq": rng.choice(VALUES).strip() or "0"})
        method = rng.choice(["GET", "PUT", "POST", "PATCH", "DELETE"])
        # The client's answer hook fails the test on any 500 or malformed error body.
        http.request(method, path, params=params, content=rng.choice(BODIES), headers=headers)
