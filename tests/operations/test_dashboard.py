"""The Grafana dashboard's shape, as Grafana imports it: every panel has a place, a title, a
description and queries against the data source the person picks at import; every query
filters by the dashboard's job and node variables. (tests/operations/test_cluster_views.py runs
each query against a real Prometheus scraping a cluster.)"""

from __future__ import annotations

import json
from typing import Any

from prometheus_server import DASHBOARD

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


def dashboard() -> dict[str, Any]:
    loaded = json.loads(DASHBOARD.read_text())
    assert isinstance(loaded, dict)
    return loaded


def panels() -> list[dict[str, Any]]:
    return [p for p in dashboard()["panels"] if p["type"] != "row"]


def test_the_dashboard_imports_with_a_data_source_of_the_persons_choice() -> None:
    board = dashboard()
    assert board["uid"] == "segmentstore" and board["title"] == "segmentstore"
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    assert variables["instance"]["includeAll"] and variables["instance"]["allValue"] == ".*"
    assert "id" not in board  # Grafana gives it one at import


def test_every_panel_is_placed_titled_described_and_queried() -> None:
    ids = [p["id"] for p in dashboard()["panels"]]
    assert len(ids) == len(set(ids))
    for panel in panels():
        where = panel["title"]
        assert panel["description"], where
        assert panel["datasource"] == DATASOURCE, where
        assert {"h", "w", "x", "y"} <= set(panel["gridPos"]), where
        assert panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24, where
        assert panel["targets"], where
        for target in panel["targets"]:
            assert target["datasource"] == DATASOURCE, where
            assert 'job=~"$job", instance=~"$instance"' in target["expr"], where


def test_no_two_panels_overlap() -> None:
    taken: set[tuple[int, int]] = set()
    for panel in dashboard()["panels"]:
        grid = panel["gridPos"]
        cells = {
            (x, y)
            for x in range(grid["x"], grid["x"] + grid["w"])
            for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert not cells & taken, panel["title"]
        taken |= cells


def test_the_dashboard_shows_what_an_operator_looks_for() -> None:
    exprs = " ".join(t["expr"] for p in panels() for t in p["targets"])
    for metric in (
        "segmentstore_http_requests_total",
        "segmentstore_http_request_duration_seconds_bucket",
        "segmentstore_container_status",
        "segmentstore_container_tier1_bytes",
        "segmentstore_container_tier2_lag_bytes",
        "segmentstore_cache_used_bytes",
        "segmentstore_container_recovery_duration_seconds",
        "segmentstore_container_recoveries_total",
        "segmentstore_cluster_forwarded_requests_total",
        "segmentstore_cluster_container_moves_total",
    ):
        assert metric in exprs, metric
