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
    assert list(variables) == ["datasource", "namespace", "job", "instance"]
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for name in ("namespace", "instance"):
        assert variables[name]["includeAll"] and variables[name]["allValue"] == ".*"
    # Two releases (namespaces) never mix: each choice narrows the next.
    assert 'namespace=~"$namespace"' in variables["job"]["query"]["query"]
    assert 'namespace=~"$namespace", job=~"$job"' in variables["instance"]["query"]["query"]
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
            filters = 'namespace=~"$namespace", job=~"$job", instance=~"$instance"'
            assert filters in target["expr"], where


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


def test_every_stat_says_by_its_colour_whether_it_is_bad() -> None:
    """No stat is green by default: each has thresholds of its own, and a count of things
    that are wrong turns red (orange for writes refused) from 1."""
    stats = {p["title"]: p for p in panels() if p["type"] == "stat"}
    for title, panel in stats.items():
        steps = panel["fieldConfig"]["defaults"]["thresholds"]["steps"]
        assert steps and steps[0]["value"] is None, title
        assert panel["fieldConfig"]["defaults"]["color"] == {"mode": "thresholds"}, title
    for title, color in [
        ("Containers not running", "red"),
        ("Containers without an owner", "red"),
        ("Nodes not ready", "red"),
        ("Nodes not taking writes", "orange"),
    ]:
        steps = stats[title]["fieldConfig"]["defaults"]["thresholds"]["steps"]
        assert steps == [{"color": "green", "value": None}, {"color": color, "value": 1}], title


def test_per_node_panels_name_the_node_as_the_cluster_map_does() -> None:
    """segmentstore_build_info carries the node's id: a table maps each instance to it, and
    the per-node panels show it in their legends."""
    by_title = {p["title"]: p for p in panels()}
    table = by_title["Nodes: instance, node id, version"]
    assert (
        "by (namespace, instance, node, version) (segmentstore_build_info"
        in table["targets"][0]["expr"]
    )
    for title in ("CPU", "Resident memory", "Open file descriptors", "Containers held per node"):
        target = by_title[title]["targets"][0]
        assert "group_left (node)" in target["expr"], title
        assert "{{node}}" in target["legendFormat"], title
