"""docs/monitoring.md and docs/runbook.md hold together: every link resolves (files and
headings), the alert table lists exactly the alerts of the rules file, and the screenshot of
the status page (taken by test_cluster_views.py) is there."""

from __future__ import annotations

import re
import struct
from pathlib import Path

import pytest
import yaml
from prometheus_server import ALERTS, REPO

DOCS = REPO / "docs"
PAGES = [DOCS / "monitoring.md", DOCS / "runbook.md"]


def anchors(page: Path) -> set[str]:
    headings = re.findall(r"^#+ (.+)$", page.read_text(), flags=re.MULTILINE)
    return {re.sub(r"[^a-z0-9 _-]", "", h.strip().lower()).replace(" ", "-") for h in headings}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_link_resolves(page: Path) -> None:
    for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
        if target.startswith(("http://", "https://")):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        assert linked.exists(), f"{page.name} links to {target}"
        if anchor:
            assert anchor in anchors(linked), f"{page.name} links to {target}"


def test_the_alert_table_lists_every_alert() -> None:
    names = [r["alert"] for g in yaml.safe_load(ALERTS.read_text())["groups"] for r in g["rules"]]
    listed = re.findall(r"^\| \[(SegmentStore\w+)\]", (DOCS / "monitoring.md").read_text(), re.M)
    assert listed == names


def test_the_screenshot_of_the_status_page_is_there() -> None:
    shot = DOCS / "images" / "status-page.png"
    assert "(images/status-page.png)" in (DOCS / "monitoring.md").read_text()
    header = shot.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", header[16:24])
    assert width >= 1000 and height >= 600
