"""The grouping and inhibition docs/monitoring.md gives for Alertmanager, in a real
Alertmanager (Debian's): the configuration it shows starts as written, and the alerts one full
Tier 2 raises on a node reach a person as the three that explain the others, each once per
group, while a node that is down silences everything else about it."""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
import yaml
from debian_packages import require
from prometheus_server import REPO

from segmentstore.loopback import free_port

pytestmark = [pytest.mark.integration]

MONITORING = REPO / "docs" / "monitoring.md"


def documented_config() -> dict[str, Any]:
    (block,) = [b for b in re.findall(r"```yaml\n(.*?)```", MONITORING.read_text(), re.S)
                if "inhibit_rules" in b]  # fmt: skip
    config = yaml.safe_load(block)
    assert isinstance(config, dict)
    return config


@pytest.fixture(scope="module")
def alertmanager(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    binary = require("prometheus-alertmanager", "prometheus-alertmanager")
    root = tmp_path_factory.mktemp("alertmanager")
    (root / "alertmanager.yml").write_text(yaml.safe_dump(documented_config()))
    port = free_port()
    with (root / "alertmanager.log").open("wb") as log:
        process = subprocess.Popen(
            [binary, f"--config.file={root / 'alertmanager.yml'}",
             f"--storage.path={root / 'data'}", f"--web.listen-address=127.0.0.1:{port}",
             "--cluster.listen-address="],
            stdout=log, stderr=log, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, (root / "alertmanager.log").read_text()
            try:
                if httpx.get(f"{url}/-/ready", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, (root / "alertmanager.log").read_text()
            time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def alert(name: str, severity: str, instance: str, **labels: str) -> dict[str, Any]:
    now = datetime.now(UTC)
    return {
        "labels": {
            "alertname": name,
            "severity": severity,
            "job": "segmentstore",
            "namespace": "streams",
            "instance": instance,
            **labels,
        },
        "annotations": {"summary": name},
        "startsAt": now.isoformat(),
        "endsAt": (now + timedelta(hours=1)).isoformat(),
    }


def shown(url: str, instance: str) -> tuple[set[str], int]:
    """(names of the alerts of ``instance`` that Alertmanager lets through, how many groups
    they make)."""
    alerts = httpx.get(
        f"{url}/api/v2/alerts", params={"inhibited": "false", "silenced": "false"}, timeout=5
    ).json()
    mine = [a for a in alerts if a["labels"]["instance"] == instance]
    groups = {a["labels"]["alertname"] for a in mine}  # group_by: alertname, namespace, job
    return {a["labels"]["alertname"] for a in mine}, len(groups)


def test_the_documented_configuration_groups_and_inhibits_a_full_tier2(alertmanager: str) -> None:
    node = "n1:9090"
    storm = [alert("SegmentStoreTier2NearFull", "warning", node, tier="tier2")]
    for container in "0123":
        storm += [
            alert("SegmentStoreTier2Failing", "warning", node, container=container),
            alert("SegmentStoreTier2LagGrowing", "warning", node, container=container),
            alert("SegmentStoreContainerReadOnly", "critical", node, container=container,
                  status="read_only"),
        ]  # fmt: skip
    storm += [
        alert("SegmentStoreTier1NearFull", "warning", node, tier="tier1"),
        alert("SegmentStoreFilesystemFillingFast", "critical", node, tier="tier1"),
        alert("SegmentStoreThrottling", "warning", node),
        alert("SegmentStoreAppendLatencyHigh", "warning", node),
        alert("SegmentStoreUnavailableAnswers", "warning", node),
        alert("SegmentStoreNodeNotReady", "warning", node),
    ]
    assert httpx.post(f"{alertmanager}/api/v2/alerts", json=storm, timeout=5).is_success

    def settled() -> tuple[set[str], int] | None:
        names, groups = shown(alertmanager, node)
        return (names, groups) if len(names) == 3 else None

    deadline = time.monotonic() + 10
    while (result := settled()) is None:
        assert time.monotonic() < deadline, shown(alertmanager, node)
        time.sleep(0.1)
    names, groups = result
    print(f"{len(storm)} alerts of one full Tier 2 -> {groups} groups: {sorted(names)}")
    assert names == {
        "SegmentStoreTier2NearFull",
        "SegmentStoreTier2Failing",
        "SegmentStoreContainerReadOnly",
    }
    assert groups == 3


def test_a_node_down_silences_everything_else_about_it(alertmanager: str) -> None:
    node, other = "n2:9090", "n3:9090"
    alerts = [
        alert("SegmentStoreNodeDown", "critical", node),
        alert("SegmentStoreNodeNotReady", "warning", node),
        alert("SegmentStoreContainerNotRunning", "critical", node, container="1"),
        alert("SegmentStoreNodeNotReady", "warning", other),
    ]
    assert httpx.post(f"{alertmanager}/api/v2/alerts", json=alerts, timeout=5).is_success
    deadline = time.monotonic() + 10
    while shown(alertmanager, node)[0] != {"SegmentStoreNodeDown"}:
        assert time.monotonic() < deadline, shown(alertmanager, node)
        time.sleep(0.1)
    assert shown(alertmanager, other)[0] == {"SegmentStoreNodeNotReady"}


def test_every_alert_the_rules_name_exists() -> None:
    names = {
        rule["alert"]
        for group in yaml.safe_load(
            (REPO / "helm/segmentstore/monitoring/alerts.yaml").read_text()
        )["groups"]
        for rule in group["rules"]
    }
    named: set[str] = set()
    for rule in documented_config()["inhibit_rules"]:
        for matcher in rule["source_matchers"] + rule["target_matchers"]:
            found = re.search(r"alertname\s*(=~|=|!=)\s*\"?([^\"]+)\"?", matcher)
            if found and found.group(1) != "=~":
                named.add(found.group(2).strip())
            elif found:
                alternatives = re.fullmatch(r"SegmentStore\((.+)\)", found.group(2))
                if alternatives:
                    named |= {f"SegmentStore{a}" for a in alternatives.group(1).split("|")}
    assert named and named <= names, named - names
