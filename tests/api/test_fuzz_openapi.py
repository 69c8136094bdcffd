"""Schemathesis against the live server's own ``/openapi.json``: no request gets a 5xx.

Every operation of the published schema gets a bounded number of generated requests, valid
and invalid (schemathesis v4 generates both by default), against the module's real server
(``live`` in ``conftest.py``). Half of the requests that name a segment are pointed at a
segment that exists and holds events, so that generated offsets, attribute updates, merges
and truncations reach the store rather than stopping at ``404``.

The only 5xx allowed are the ones docs/api.md documents as answers rather than failures:
``503`` (a container recovering, as right after a fuzzed ``:restart``) and ``507``.
"""

from __future__ import annotations

import zlib
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode

from segmentstore import SegmentStore
from segmentstore.api.app import create_app
from segmentstore.contracts.errors import leaf_error_classes

from .conftest import LiveServer, frame

# One node's counters and one OpenAPI document: not run against a cluster.
LIVE_KINDS = ("one-node", "workers")

EXAMPLES_PER_CASE = 50
# A generated tail read could wait the whole 60 s the API allows; the fuzzer's budget cannot.
MAX_WAIT_MS = 50
SEGMENT = "fuzz/stream/0"
DOCUMENTED_5XX = {503, 507}
# docs/api.md's codes, and the ones api/errors.py adds for what docs/api.md is silent on.
KNOWN_CODES = {cls.code for cls in leaf_error_classes()} | {
    "not_found",
    "method_not_allowed",
}


def _operations() -> list[tuple[str, str, GenerationMode]]:
    """Every (method, path) the app publishes, to give each its own test: with valid
    requests, and with invalid ones where something can be invalid (a string path parameter
    cannot: any string is one). Read from an app over a store that is never started
    (building one touches no disk); the test fuzzes from the live server's /openapi.json
    and checks that the two agree."""
    app = create_app(SegmentStore.open("/nonexistent/fuzz-collection"))
    found = []
    for path, methods in app.openapi()["paths"].items():
        for method, operation in methods.items():
            found.append((method.upper(), path, GenerationMode.POSITIVE))
            negatable = "requestBody" in operation or any(
                p["in"] != "path" for p in operation.get("parameters", [])
            )
            if negatable:
                found.append((method.upper(), path, GenerationMode.NEGATIVE))
    return found


CASES = _operations()


@pytest.fixture(scope="module")
def api_schema(live: LiveServer) -> Any:
    loaded = schemathesis.openapi.from_url(f"{live.url}/openapi.json")
    live_operations = [
        (m.upper(), p) for p, methods in loaded.raw_schema["paths"].items() for m in methods
    ]
    assert sorted(set(live_operations)) == sorted({(m, p) for m, p, _ in CASES})
    return loaded


def _ensure_segment(url: str) -> None:
    """The target of redirected cases: recreated (with events in it) whenever a fuzzed
    delete, merge or seal has taken it away."""
    with httpx.Client(base_url=url, timeout=30) as http:
        info = http.get(f"/v1/segments/{SEGMENT}")
        if info.status_code == 200 and not info.json()["sealed"]:
            return
        if info.status_code == 200:
            http.delete(f"/v1/segments/{SEGMENT}")
        http.put(f"/v1/segments/{SEGMENT}", json={"attributes": {"a": 1}})
        http.post(f"/v1/segments/{SEGMENT}:appendEvents", content=frame(b"x" * 10, b"yy"))


def _steer(case: Any, url: str) -> None:
    """Bound waits; point about half the cases that name a segment at a real one (chosen by
    the generated name's hash, so a case replays the same)."""
    query = case.query or {}
    if isinstance(query.get("wait_ms"), int) and query["wait_ms"] > MAX_WAIT_MS:
        query["wait_ms"] = MAX_WAIT_MS
    parameters = case.path_parameters or {}
    name = parameters.get("name")
    if isinstance(name, str) and zlib.crc32(name.encode("utf-8", "replace")) % 2 == 0:
        _ensure_segment(url)
        parameters["name"] = SEGMENT


def _check(case: Any, response: Any) -> None:
    status = response.status_code
    assert status < 500 or status in DOCUMENTED_5XX, (
        f"{case.method} {case.formatted_path} -> {status}: {response.text[:500]}"
    )
    if status >= 400:
        assert b"Traceback" not in response.content
        error = response.json()["error"]
        assert error["code"] in KNOWN_CODES and isinstance(error["message"], str), error


@pytest.mark.parametrize(
    ("method", "path", "mode"), CASES, ids=[f"{m} {p} {mode}" for m, p, mode in CASES]
)
def test_no_request_gets_a_server_error(
    api_schema: Any, live: LiveServer, method: str, path: str, mode: GenerationMode
) -> None:
    operation = api_schema[path][method]

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=EXAMPLES_PER_CASE,
        deadline=None,
        database=None,  # it would write under the repository
        suppress_health_check=list(HealthCheck),
    )
    def fuzz(case: Any) -> None:
        _steer(case, live.url)
        _check(case, case.call(timeout=30))

    fuzz()


# -- found by the fuzzer --------------------------------------------------------------------
# Starlette matches a route with ``^...$``, and Python's ``$`` also matches just before a
# final newline, while ``{name:path}`` (``.*``) matches no newline at all. So a name ending in
# "\n" is silently cut to the name before it, and one with an inner "\n" matches no route.
# docs/api.md: such a name is ``400 invalid_name`` and never reaches the store.


def test_a_trailing_newline_is_not_cut_off_the_name(http: httpx.Client) -> None:
    try:
        response = http.put("/v1/segments/fuzz/newline%0A")
        assert response.status_code == 400, response.json()
        assert response.json()["error"]["code"] == "invalid_name"
    finally:
        http.delete("/v1/segments/fuzz/newline")


def test_an_inner_newline_is_an_invalid_name(http: httpx.Client) -> None:
    response = http.put("/v1/segments/fuzz/new%0Aline")
    assert response.status_code == 400, response.json()
    assert response.json()["error"]["code"] == "invalid_name"
