"""``segmentstore drill --spawn`` with power losses, end to end: the node's disks (or the three
JetStream servers' disks) on lazyfs, SIGKILL and the loss of what was not synced, a restart,
and every acknowledged append verified byte for byte. A short run of each: the long ones are
in docs/operations.md."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from drill_cli import run_drill
from lazy_mounts import mount_or_skip

pytestmark = pytest.mark.integration

_NOTE = re.compile(r"seed \d+: dropped \d+/\d+ writes in \d+ files, \d+/\d+ name changes")


def _fuse_or_skip(tmp_path: Path) -> None:
    mount_or_skip(tmp_path / "probe").unmount()


def _passed(report_path: Path, kind: str, mounts: int) -> None:
    report = json.loads(report_path.read_text())
    assert report["skipped"] == {}, report["skipped"]
    faults = report["faults"]
    assert faults and {f["kind"] for f in faults} == {kind}
    for fault in faults:
        assert fault["recovery_s"] is not None, fault
        # The note names the seed that replays each disk's loss, and what it dropped.
        assert len(_NOTE.findall(fault["note"])) == mounts, fault["note"]
    assert report["acknowledged"] > 0 and report["verified"] == report["acknowledged"]
    assert report["lost"] == report["torn"] == report["duplicated"] == 0
    assert report["exactly_once_failures"] == 0 and report["passed"] is True


def test_a_node_that_loses_power_loses_nothing_acknowledged(tmp_path: Path) -> None:
    _fuse_or_skip(tmp_path)
    report_path = tmp_path / "drill.json"
    done = run_drill(
        "--spawn", "--duration", "20", "--seed", "5", "--faults", "power_loss",
        "--segments", "6", "--writers", "6", "--readers", "1", "--json", str(report_path),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    _passed(report_path, "power_loss", mounts=2)  # the data directory and Tier 2


def test_three_jetstream_servers_that_lose_power_together_lose_nothing(tmp_path: Path) -> None:
    _fuse_or_skip(tmp_path)
    report_path = tmp_path / "drill.json"
    done = run_drill(
        "--spawn", "--tier1", "jetstream", "--duration", "5", "--seed", "5",
        "--faults", "jetstream_power_loss", "--segments", "6", "--writers", "6",
        "--readers", "1", "--json", str(report_path),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    _passed(report_path, "jetstream_power_loss", mounts=3)
