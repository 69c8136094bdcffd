"""``segmentstore drill --spawn`` end to end: a short drill with real processes, a SIGKILL, a
torn Tier 1 tail and (where a tmpfs can be mounted) a full Tier 1, verified byte for byte."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from drill_cli import run_drill


@pytest.mark.integration
def test_a_short_drill_heals_every_fault_and_loses_nothing(tmp_path: Path) -> None:
    report_path = tmp_path / "drill.json"
    done = run_drill(
        "--spawn", "--duration", "4", "--seed", "3", "--faults", "kill,torn_tail,tier1_full",
        "--hold-s", "1", "1.5", "--segments", "6", "--writers", "6", "--readers", "1",
        "--max-recovery-s", "60", "--json", str(report_path),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    report = json.loads(report_path.read_text())
    kinds = {f["kind"] for f in report["faults"]}
    expected = {"kill", "torn_tail", "tier1_full"} - set(report["skipped"])
    assert kinds == expected, report
    assert all(f["recovery_s"] is not None for f in report["faults"])
    assert report["acknowledged"] > 0 and report["verified"] == report["acknowledged"]
    assert report["lost"] == report["torn"] == report["duplicated"] == 0
    assert report["exactly_once_failures"] == 0 and report["passed"] is True
    # Not a terminal: plain progress lines, then the table.
    assert "drill " in done.stdout and "PASSED" in done.stdout
    if "tier1_full" in kinds:
        full = next(f for f in report["faults"] if f["kind"] == "tier1_full")
        assert "reads failed 0/" in full["note"], full
