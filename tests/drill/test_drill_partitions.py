"""``segmentstore drill --spawn --nodes 3`` with every partition fault, end to end: every link
through the drill's switchboard; a node cut off from JetStream (it must stop serving within
its lease, the others take over, and it is fenced once healed), a node cut off from the other
nodes, a JetStream server isolated, a one-way link and a delay, each held past the lease and
healed, then verified byte for byte, with no append acknowledged by a fenced-out owner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from drill_cli import run_drill

from segmentstore.drill.faults import PARTITION_KINDS

pytestmark = [pytest.mark.cluster, pytest.mark.integration, pytest.mark.slow]

LEASE_S = 2.0


def test_a_short_partition_drill_heals_every_partition_and_loses_nothing(tmp_path: Path) -> None:
    report_path = tmp_path / "drill.json"
    done = run_drill(
        "--spawn", "--nodes", "3", "--tier2", "file", "--lease-ms", str(int(LEASE_S * 1000)),
        "--duration", "3", "--seed", "2", "--faults", ",".join(PARTITION_KINDS),
        "--hold-s", "0.5", "1", "--segments", "6", "--writers", "6", "--readers", "1",
        "--max-recovery-s", "45", "--json", str(report_path),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-4000:]
    report = json.loads(report_path.read_text())
    assert sorted(f["kind"] for f in report["faults"]) == sorted(PARTITION_KINDS)
    for fault in report["faults"]:
        assert fault["recovery_s"] is not None, fault
        assert fault["measures"]["held_s"] > LEASE_S, fault  # held past the lease
    cut_off = next(f for f in report["faults"] if f["kind"] == "jetstream_partition")
    measures = cut_off["measures"]
    # It stopped serving what it could not renew within its lease, the others served every
    # container meanwhile, and it said it gave its containers up.
    assert measures["stopped_serving_s"] is not None, cut_off
    assert measures["stopped_serving_s"] <= LEASE_S + 0.1, cut_off
    assert measures["takeover_s"] is not None and measures["fencings_logged"] >= 1, cut_off
    assert report["acknowledged"] > 0 and report["verified"] == report["acknowledged"]
    assert report["lost"] == report["torn"] == report["duplicated"] == 0
    assert report["exactly_once_failures"] == report["stale_acknowledged"] == 0
    assert report["passed"] is True
