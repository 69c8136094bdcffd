"""``/metrics`` as Prometheus reads it: parsed by ``prometheus_client.parser``, every route of
the API labelled with its template, and the histograms an operator looks at first."""

from __future__ import annotations

import struct
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from segmentstore.api.metrics import CONTENT_TYPE, UNMATCHED_ROUTE

# One process's counters and one OpenAPI document: not run against a cluster.
ONE_NODE_ONLY = True

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]

NEW_HISTOGRAMS = (
    "segmentstore_tier1_write_duration_seconds",
    "segmentstore_tier2_write_duration_seconds",
    "segmentstore_tier2_write_bytes",
    "segmentstore_container_recovery_duration_seconds",
)


def scrape(http: httpx.Client) -> tuple[dict[str, str], list[Sample]]:
    """Every family's type and every sample, as Prometheus' own parser reads them."""
    r = http.get("/metrics")
    assert r.status_code == 200
    assert r.headers["Content-Type"] == CONTENT_TYPE
    types, samples = {}, []
    for family in text_string_to_metric_families(r.text):
        types[family.name] = family.type
        samples.extend(family.samples)
    return types, samples


def by_key(samples: list[Sample]) -> Samples:
    return {(s.name, frozenset(s.labels.items())): s.value for s in samples}


def routes_seen(samples: list[Sample]) -> set[str]:
    return {s.labels["route"] for s in samples if s.name == "segmentstore_http_requests_total"}


def app_routes(live: Any) -> set[str]:
    spec = httpx.get(f"{live.url}/openapi.json").json()
    return set(spec["paths"])


def test_every_route_is_labelled_by_its_template(live: Any, http: httpx.Client) -> None:
    s = "metrics/every/route"
    event = struct.pack(">ii", 0, 5) + b"event"
    requests: list[tuple[str, str, dict[str, Any]]] = [
        ("PUT", f"/v1/segments/{s}", {}),
        ("GET", f"/v1/segments/{s}", {}),
        ("GET", "/v1/segments", {"params": {"prefix": "metrics/"}}),
        ("POST", f"/v1/segments/{s}:append", {"content": b"bytes"}),
        ("POST", f"/v1/segments/{s}:appendEvents", {"content": event}),
        ("GET", f"/v1/segments/{s}:read", {"params": {"offset": 0}}),
        ("GET", f"/v1/segments/{s}:readEvents", {"params": {"offset": 5}}),
        ("GET", f"/v1/segments/{s}:offsetAt", {"params": {"timestamp_ms": 0}}),
        ("GET", f"/v1/segments/{s}:attributes", {}),
        (
            "PATCH",
            f"/v1/segments/{s}:attributes",
            {"json": {"updates": [{"key": "k", "value": 1}]}},
        ),
        ("PUT", f"/v1/segments/{s}:retention", {"json": {"bytes": 1 << 30}}),
        ("POST", f"/v1/segments/{s}:beginTransaction", {}),
        ("POST", f"/v1/segments/{s}:truncate", {"json": {"offset": 0}}),
        ("POST", f"/v1/segments/{s}:seal", {}),
        ("GET", "/v1/containers", {}),
        ("GET", "/v1/cluster", {}),
        ("POST", "/v1/containers/0:restart", {}),
        ("GET", "/healthz", {}),
        ("GET", "/readyz", {}),
        ("GET", "/metrics", {}),
        ("GET", "/openapi.json", {}),
        ("GET", "/docs", {}),
        ("GET", "/docs/oauth2-redirect", {}),
        ("GET", "/redoc", {}),
    ]
    for method, path, options in requests:
        r = http.request(method, path, **options)
        assert r.status_code < 300, (method, path, r.status_code, r.text)
    transaction = http.post(f"/v1/segments/{s}-target:beginTransaction")
    assert transaction.status_code == 404  # a refusal is labelled too
    http.put(f"/v1/segments/{s}-target")
    txn = http.post(f"/v1/segments/{s}-target:beginTransaction").json()["transaction"]
    merge = http.post(f"/v1/segments/{s}-target:merge", json={"source": txn})
    assert merge.status_code == 200
    assert http.delete(f"/v1/segments/{s}").status_code == 204

    types, samples = scrape(http)
    seen = routes_seen(samples)
    assert UNMATCHED_ROUTE not in seen
    assert app_routes(live) | {"/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json"} <= seen
    for name in NEW_HISTOGRAMS:
        assert types[name] == "histogram", name
    values = by_key(samples)
    # The appends above went through Tier 1; the restart above recovered container 0.
    assert values[("segmentstore_tier1_write_duration_seconds_count", frozenset())] >= 2
    recovered = frozenset({("container", "0")})
    assert values[("segmentstore_container_recovery_duration_seconds_count", recovered)] >= 1
    # Names never become labels: one series per route template.
    assert all(s not in value for sample in samples for value in sample.labels.values())


def test_appends_and_store_figures(http: httpx.Client, segment: str) -> None:
    _, before = scrape(http)
    http.post(f"/v1/segments/{segment}:append", content=b"x" * 100)
    http.get(f"/v1/segments/{segment}:read", params={"offset": 0})
    types, after = scrape(http)
    grown = by_key(after)[("segmentstore_append_bytes_total", frozenset())]
    assert grown - by_key(before)[("segmentstore_append_bytes_total", frozenset())] == 100
    route = frozenset(
        {("method", "POST"), ("route", "/v1/segments/{name}:append"), ("status", "200")}
    )
    values = by_key(after)
    assert values[("segmentstore_http_requests_total", route)] >= 1
    assert values[("segmentstore_http_request_duration_seconds_bucket", route | {("le", "+Inf")})]
    for c in range(4):
        running = frozenset({("container", str(c)), ("status", "running")})
        assert values[("segmentstore_container_status", running)] == 1
        for name in (
            "epoch", "segments", "tier1_bytes", "tier2_lag_bytes", "last_sequence",
            "retention_lag_seconds", "retention_truncated_bytes_total",
        ):  # fmt: skip
            assert (f"segmentstore_container_{name}", frozenset({("container", str(c))})) in values
    for name in ("used_bytes", "max_bytes", "evictions_total"):
        assert (f"segmentstore_cache_{name}", frozenset()) in values
    assert values[("segmentstore_node_ready", frozenset())] == 1
    # The test server keeps Tier 1 and Tier 2 on the local disk.
    for tier in ("tier1", "tier2"):
        labels = frozenset({("tier", tier)})
        size = values[("segmentstore_filesystem_size_bytes", labels)]
        assert 0 < values[("segmentstore_filesystem_avail_bytes", labels)] <= size
        assert values[("segmentstore_filesystem_read_only", labels)] == 0
    for c in range(4):  # each container's recovery series exists from the start
        key = (
            "segmentstore_container_recovery_duration_seconds_count",
            frozenset({("container", str(c))}),
        )
        assert key in values
    assert types["segmentstore_append_bytes"] == "counter"
    assert any(s.name == "process_cpu_seconds_total" for s in after)
    assert any(s.name == "segmentstore_build_info" and s.labels["version"] for s in after)


def test_refusals_before_routing_carry_the_route(secured: Any) -> None:
    with secured.client() as anonymous:
        assert anonymous.get("/v1/segments/scope/s/0").status_code == 401
        assert anonymous.post("/v1/segments/scope/s/0:seal").status_code == 401
        assert anonymous.get("/no/such/route").status_code == 404
        _, samples = scrape(anonymous)
    statuses = {
        (s.labels["route"], s.labels["status"])
        for s in samples
        if s.name == "segmentstore_http_requests_total"
    }
    assert ("/v1/segments/{name}", "401") in statuses
    assert ("/v1/segments/{name}:seal", "401") in statuses
    assert (UNMATCHED_ROUTE, "404") in statuses


def test_an_answer_that_is_a_bug_is_counted_from_zero(
    live: Any, http: httpx.Client, segment: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every route's internal-error series is there from the start at zero, so that the
    alert's increase() counts the first 500 (a series that begins at 1 shows none)."""

    def errors() -> dict[tuple[str, str], float]:
        _, samples = scrape(http)
        return {
            (s.labels["method"], s.labels["route"]): s.value
            for s in samples
            if s.name == "segmentstore_http_internal_errors_total"
        }

    before = errors()
    assert app_routes(live) <= {route for _, route in before}
    assert before[("POST", "/v1/segments/{name}:append")] == 0
    assert before[("GET", "/v1/segments/{name}:attributes")] == 0

    def a_bug(*_: object, **__: object) -> None:
        raise RuntimeError("a bug on the way")

    monkeypatch.setattr(live.store, "get_attributes", a_bug)
    with httpx.Client(base_url=live.url, timeout=30) as unchecked:
        assert unchecked.get(f"/v1/segments/{segment}:attributes").status_code == 500
    after = errors()
    assert after[("GET", "/v1/segments/{name}:attributes")] == 1
    assert {k: v for k, v in after.items() if v} == {("GET", "/v1/segments/{name}:attributes"): 1}
