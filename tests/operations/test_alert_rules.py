"""The alerts as Prometheus' own tool sees them: ``promtool check rules`` accepts the rules
file, ``promtool test rules`` runs a unit test per alert (series that make it fire, with the
labels and annotations an operator receives, and series that must not), and each alert links
to the section of the runbook that bears its name and says what to do."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import yaml
from prometheus_server import ALERTS, REPO, scaled_rules

HERE = Path(__file__).resolve().parent
UNIT_TESTS = HERE / "alerts_test.yaml"
RUNBOOK = REPO / "docs" / "runbook.md"
RUNBOOK_PARTS = ("**What it means.**", "**What the store does by itself.**", "**What to check.**")


def rules() -> list[dict[str, Any]]:
    groups = yaml.safe_load(ALERTS.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"]]


def github_anchor(heading: str) -> str:
    """The anchor GitHub (and most Markdown renderers) give a heading."""
    return re.sub(r"[^a-z0-9 _-]", "", heading.strip().lower()).replace(" ", "-")


def runbook_sections() -> dict[str, str]:
    """Second-level heading -> the text under it."""
    parts = re.split(r"^## (.+)$", RUNBOOK.read_text(), flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_promtool_accepts_the_rules(promtool: str) -> None:
    checked = subprocess.run(
        [promtool, "check", "rules", str(ALERTS)], capture_output=True, text=True, timeout=60
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(rules())} rules found" in checked.stdout


def test_every_alert_has_a_unit_test_where_it_fires_and_one_where_it_does_not() -> None:
    cases = [
        case for test in yaml.safe_load(UNIT_TESTS.read_text())["tests"]
        for case in test["alert_rule_test"]
    ]  # fmt: skip
    names = {rule["alert"] for rule in rules()}
    assert {case["alertname"] for case in cases if case["exp_alerts"]} == names
    assert {case["alertname"] for case in cases if not case["exp_alerts"]} == names


def test_promtool_runs_the_unit_tests(promtool: str) -> None:
    tested = subprocess.run(
        [promtool, "test", "rules", UNIT_TESTS.name],
        cwd=HERE,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout


def test_every_alert_is_labelled_and_explained() -> None:
    for rule in rules():
        assert rule["alert"].startswith("SegmentStore"), rule["alert"]
        assert rule["labels"]["severity"] in ("critical", "warning"), rule["alert"]
        assert set(rule["annotations"]) == {"summary", "description", "runbook_url"}


def test_every_alert_links_to_its_runbook_section() -> None:
    sections = runbook_sections()
    for rule in rules():
        name = rule["alert"]
        assert rule["annotations"]["runbook_url"] == f"docs/runbook.md#{github_anchor(name)}"
        assert name in sections, f"docs/runbook.md has no section {name}"
        for part in RUNBOOK_PARTS:
            assert part in sections[name], f"the runbook's {name} lacks {part}"
    # ... and the runbook explains no alert that does not exist.
    assert set(sections) == {rule["alert"] for rule in rules()}


def test_the_test_server_scales_minutes_to_seconds() -> None:
    scaled = {
        rule["alert"]: rule for group in scaled_rules()["groups"] for rule in group["rules"]
    }  # fmt: skip
    lag = scaled["SegmentStoreTier2LagGrowing"]
    assert lag["for"] == "10s"
    assert "[5s] offset 5s)" in lag["expr"] and "[10s])" in lag["expr"]
    assert "[60s])" in scaled["SegmentStoreRecoverySlow"]["expr"]
    assert 'le="60.0"' in scaled["SegmentStoreRecoverySlow"]["expr"]
