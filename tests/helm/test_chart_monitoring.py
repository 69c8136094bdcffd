"""What the chart gives Prometheus and Grafana: the alerts as a ``PrometheusRule`` and the
dashboard as a ConfigMap for Grafana's sidecar, both off by default, both rendered from the
same files an operator without Kubernetes loads (``helm/segmentstore/monitoring/``)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from debian_packages import require
from helm_chart import CHART, helm, render

MONITORING = CHART / "monitoring"
METRICS_ON = CHART / "ci" / "metrics-on.yaml"


def _alerts(groups: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {rule["alert"]: rule for group in groups for rule in group["rules"]}


def test_the_alerts_render_as_a_prometheus_rule_that_promtool_accepts(tmp_path: Path) -> None:
    rule = render(METRICS_ON).one("PrometheusRule")
    assert rule["metadata"]["labels"]["release"] == "prometheus"
    groups = rule["spec"]["groups"]
    rendered = tmp_path / "rendered.yaml"
    rendered.write_text(yaml.safe_dump({"groups": groups}))
    checked = subprocess.run(
        [require("promtool", "prometheus"), "check", "rules", str(rendered)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr

    source = _alerts(yaml.safe_load((MONITORING / "alerts.yaml").read_text())["groups"])
    alerts = _alerts(groups)
    # ci/metrics-on.yaml leaves one alert out, adds a label, and sets the runbook address.
    assert set(source) - set(alerts) == {"SegmentStoreTier2NearFull"}
    for name, alert in alerts.items():
        original = source[name]
        assert alert["labels"] == {**original["labels"], "team": "storage"}
        link = original["annotations"]["runbook_url"]
        base = "https://docs.example.com/segmentstore/"
        assert alert["annotations"]["runbook_url"] == base + link
        # The job is the headless Service's, the one the ServiceMonitor scrapes.
        expr = original["expr"].replace('job="segmentstore"', 'job="demo-segmentstore-headless"')
        assert alert["expr"] == expr
        assert alert.get("for") == original.get("for")
        assert {k: v for k, v in alert["annotations"].items() if k != "runbook_url"} == {
            k: v for k, v in original["annotations"].items() if k != "runbook_url"
        }
    assert 'job="demo-segmentstore-headless"' in alerts["SegmentStoreNodeDown"]["expr"]


def test_the_dashboard_renders_as_a_configmap_for_grafanas_sidecar() -> None:
    rendered = render(METRICS_ON)
    dashboard = rendered.one("ConfigMap", "demo-segmentstore-dashboard")
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert dashboard["metadata"]["annotations"] == {"grafana_folder": "Storage"}
    (name,) = dashboard["data"]
    assert name.endswith(".json")
    assert json.loads(dashboard["data"][name]) == json.loads(
        (MONITORING / "dashboard.json").read_text()
    )
    elsewhere = render(METRICS_ON, metrics__grafanaDashboard__namespace="monitoring")
    moved = elsewhere.one("ConfigMap", "demo-segmentstore-dashboard")
    assert moved["metadata"]["namespace"] == "monitoring"


def test_both_are_off_by_default() -> None:
    rendered = render()
    assert not rendered.all("PrometheusRule")
    assert [c["metadata"]["name"] for c in rendered.all("ConfigMap")] == ["demo-segmentstore"]


def test_the_schema_knows_every_alert_that_can_be_left_out() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    disabled = schema["properties"]["metrics"]["properties"]["prometheusRule"]["properties"]
    names = _alerts(yaml.safe_load((MONITORING / "alerts.yaml").read_text())["groups"])
    assert disabled["disabled"]["items"]["enum"] == list(names)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--set", "metrics.prometheusRule.disabled[0]=NoSuchAlert"], "disabled.0"),
        (["--set", "metrics.grafanaDashboard.bogus=1"], "Additional property bogus"),
    ],
)
def test_the_schema_refuses_a_misspelt_value(flags: list[str], message: str) -> None:
    answer = helm("template", "demo", str(CHART), *flags)
    assert answer.returncode != 0
    assert message in answer.stderr
