"""Containers, probes, metrics and the OpenAPI document over HTTP."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from segmentstore.containers.status import ContainerStatus
from segmentstore.tier1 import DataLogCorruptionError

CONTAINER_FIELDS = {
    "id", "epoch", "status", "segments", "active_segments", "tier1_bytes", "tier2_lag_bytes",
    "last_sequence", "recoveries", "takeovers",
}  # fmt: skip
# Why a container is not running, and the Tier 2 failure being retried: null when all is well.
HEALTH_FIELDS = {"reason", "tier2_error", "owner"}


def _containers(http: httpx.Client) -> list[dict[str, Any]]:
    r = http.get("/v1/containers")
    assert r.status_code == 200
    containers: list[dict[str, Any]] = r.json()["containers"]
    return containers


def test_containers_list(http: httpx.Client, segment: str) -> None:
    containers = _containers(http)
    assert [c["id"] for c in containers] == [0, 1, 2, 3]
    for c in containers:
        assert set(c) == CONTAINER_FIELDS | HEALTH_FIELDS
        assert c["status"] == "running"
        assert c["reason"] is None and c["tier2_error"] is None
        assert all(isinstance(c[k], int) for k in CONTAINER_FIELDS - {"status"})
    home = http.get(f"/v1/segments/{segment}").json()["container"]
    assert containers[home]["segments"] >= 1


def test_restart_recovers_in_place_with_a_higher_epoch(http: httpx.Client, segment: str) -> None:
    http.post(f"/v1/segments/{segment}:append", content=b"durable")
    home = http.get(f"/v1/segments/{segment}").json()["container"]
    before = _containers(http)[home]
    r = http.post(f"/v1/containers/{home}:restart")
    assert r.status_code == 200
    after = r.json()
    assert set(after) == CONTAINER_FIELDS | HEALTH_FIELDS
    assert after["status"] == "running" and after["epoch"] > before["epoch"]
    assert http.get(f"/v1/segments/{segment}:read", params={"offset": 0}).content == b"durable"


@pytest.mark.parametrize(
    ("container", "status", "code"),
    [
        ("4", 404, "container_not_found"),
        ("-1", 404, "container_not_found"),
        ("99999999999999999999", 404, "container_not_found"),
        ("x", 400, "invalid_argument"),
        ("1_0", 400, "invalid_argument"),
        ("+1", 400, "invalid_argument"),
        ("%C2%B2", 400, "invalid_argument"),  # "²": a digit to str.isdigit, not to int
        ("%D9%A3", 400, "invalid_argument"),  # an Arabic-Indic 3: int() takes it
        ("", 404, "not_found"),  # no container id: no such route
    ],
)
def test_restart_of_an_unknown_container(
    http: httpx.Client, container: str, status: int, code: str
) -> None:
    def epochs() -> list[tuple[int, int, str]]:
        return [(c["id"], c["epoch"], c["status"]) for c in _containers(http)]

    before = epochs()
    r = http.post(f"/v1/containers/{container}:restart")
    assert r.status_code == status
    assert r.json()["error"]["code"] == code
    assert epochs() == before


def test_healthz(http: httpx.Client) -> None:
    r = http.get("/healthz")
    assert r.status_code == 200
    assert r.json() == {"status": "ok", "writable": True, "read_only_containers": []}


def test_readyz_when_every_container_runs(http: httpx.Client) -> None:
    r = http.get("/readyz")
    assert r.status_code == 200 and r.json() == {"status": "ready"}


@pytest.fixture
def offline_container(live: Any) -> Iterator[int]:
    """Container 1 marked offline behind the API's back (as a failed Tier 1 would leave it),
    then recovered through the API."""
    if live.store is None:
        pytest.skip("reaches behind the API of one process")
    container = live.store.containers[1]
    container.status = ContainerStatus.OFFLINE
    # A permanent failure, so that the supervisor leaves it for the test to recover.
    container.failure_error = DataLogCorruptionError("tier1", 0, "injected")
    yield 1
    with live.client() as client:
        assert client.post("/v1/containers/1:restart").json()["status"] == "running"


def test_an_offline_container_is_503_with_retry_after(
    http: httpx.Client, offline_container: int
) -> None:
    ready = http.get("/readyz")
    assert ready.status_code == 503
    assert ready.headers["Retry-After"].isdigit()
    error = ready.json()["error"]
    assert error["code"] == "container_unavailable"
    assert [c["id"] for c in error["containers"]] == [offline_container]
    assert _containers(http)[offline_container]["status"] == "offline"
    # "myScope/myStream/3" lives in container 1 of 4 (Pravega's mapping, test_mapping.py).
    r = http.put("/v1/segments/myScope/myStream/3")
    assert r.status_code == 503
    assert r.json()["error"]["code"] == "container_unavailable"
    assert int(r.headers["Retry-After"]) >= 1
    assert http.get("/v1/segments").status_code == 503


def test_openapi_describes_binary_bodies(http: httpx.Client) -> None:
    spec = http.get("/openapi.json").json()
    binary = {"type": "string", "format": "binary"}
    paths = spec["paths"]
    for action in ("append", "appendEvents"):
        body = paths[f"/v1/segments/{{name}}:{action}"]["post"]["requestBody"]
        assert body["required"] is True
        schema = body["content"]["application/octet-stream"]["schema"]
        assert binary.items() <= schema.items()  # the framed body also says its framing
    for action in ("read", "readEvents"):
        answers = paths[f"/v1/segments/{{name}}:{action}"]["get"]["responses"]
        assert answers["200"]["content"]["application/octet-stream"]["schema"] == binary
        assert "Segment-Length" in answers["200"]["headers"]
        assert "204" in answers
    assert (
        "put" in paths["/v1/segments/{name}"]
        and "201" in paths["/v1/segments/{name}"]["put"]["responses"]
    )
    assert "/v1/containers/{container_id}:restart" in paths


def test_an_unexpected_error_is_a_json_500_without_a_traceback(
    live: Any, segment: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    if live.store is None:
        pytest.skip("reaches behind the API of one process")

    async def broken(name: str) -> dict[str, int]:
        raise RuntimeError("a bug with a secret inside")

    monkeypatch.setattr(live.store, "get_attributes", broken)
    # Not the suite's client: its hook refuses every 500.
    with httpx.Client(base_url=live.url, timeout=30) as plain:
        r = plain.get(f"/v1/segments/{segment}:attributes")
    assert r.status_code == 500
    assert r.json() == {"error": {"code": "internal", "message": "internal error"}}
    assert "secret" not in r.text and "Traceback" not in r.text
    assert any(
        record.name == "segmentstore.api.errors" and record.exc_info for record in caplog.records
    ), "the error was not logged"


def test_restarts_under_load_lose_no_acknowledged_append(live: Any, segment: str) -> None:
    """Appends and tail reads racing with restarts get answers (200, or 503 while the
    container recovers; never a 500), and every acknowledged append is there afterwards."""
    stop = threading.Event()
    acknowledged: list[tuple[int, bytes]] = []

    def write(writer: int) -> None:
        with live.client() as client:
            sequence = 0
            while not stop.is_set():
                record = f"<{writer}:{sequence}>".encode()
                r = client.post(f"/v1/segments/{segment}:append", content=record)
                assert r.status_code in (200, 503)
                if r.status_code == 200:
                    acknowledged.append((r.json()["offset"], record))
                    sequence += 1

    def tail_read() -> None:
        with live.client() as client:
            offset = 0
            while not stop.is_set():
                params = {"offset": offset, "wait_ms": 100}
                r = client.get(f"/v1/segments/{segment}:read", params=params)
                assert r.status_code in (200, 204, 503)
                offset += len(r.content) if r.status_code == 200 else 0

    with live.client() as http:
        home = http.get(f"/v1/segments/{segment}").json()["container"]
        with ThreadPoolExecutor(5) as pool:
            tasks = [pool.submit(write, w) for w in range(3)] + [pool.submit(tail_read)] * 2
            deadline = time.monotonic() + 10
            while len(acknowledged) < 30 and time.monotonic() < deadline:
                time.sleep(0.01)  # the restarts must land among appends
            epochs = [http.post(f"/v1/containers/{home}:restart").json()["epoch"] for _ in range(4)]
            stop.set()
            for task in tasks:
                task.result()
        assert epochs == sorted(set(epochs))
        data = http.get(f"/v1/segments/{segment}:read", params={"offset": 0}).content
    assert acknowledged
    for offset, record in acknowledged:
        assert data[offset : offset + len(record)] == record
