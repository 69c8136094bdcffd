"""``segmentstore drill --spawn --nodes 3`` end to end: a JetStream cluster, three cluster nodes
and Tier 2 on a moto server, all real processes; a node SIGKILLed, a node paused past its lease,
a node stopped gracefully and a JetStream server SIGKILLed, each healed and then verified byte
for byte, with the nodes' resources sampled through the run."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from drill_cli import run_drill

pytestmark = [pytest.mark.cluster, pytest.mark.integration, pytest.mark.slow]


def test_a_short_cluster_drill_heals_every_fault_and_loses_nothing(tmp_path: Path) -> None:
    report_path = tmp_path / "drill.json"
    done = run_drill(
        "--spawn", "--nodes", "3", "--tier2", "s3", "--lease-ms", "2000",
        "--duration", "3", "--seed", "5", "--faults", "kill,node_pause,node_leave,jetstream_kill",
        "--sample-s", "1",
        "--hold-s", "0.5", "1", "--segments", "6", "--writers", "6", "--readers", "1",
        "--max-recovery-s", "45", "--json", str(report_path),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-4000:]
    report = json.loads(report_path.read_text())
    kinds = {"kill", "node_pause", "node_leave", "jetstream_kill"}
    assert {f["kind"] for f in report["faults"]} == kinds
    assert set(report["recovery_by_kind"]) == kinds
    assert all(f["recovery_s"] is not None for f in report["faults"])
    # Each node fault was mended: the node or JetStream server came back and the cluster
    # settled again with it.
    assert all("settled again in" in f["note"] for f in report["faults"]), report["faults"]
    # The paused node woke up as a stale owner and gave its containers up.
    pause = next(f for f in report["faults"] if f["kind"] == "node_pause")
    said = re.search(r"on waking it logged (\d+) lost leases or fencings", pause["note"])
    assert said is not None and int(said.group(1)) >= 1, pause
    assert report["acknowledged"] > 0 and report["verified"] == report["acknowledged"]
    assert report["lost"] == report["torn"] == report["duplicated"] == 0
    assert report["exactly_once_failures"] == 0 and report["passed"] is True
    assert "drill " in done.stdout and "PASSED" in done.stdout
    # Every node's descriptors, threads, memory and sockets, and the deployment's JetStream
    # consumers, were sampled; none kept growing.
    samples = report["resources"]["samples"]
    assert len(samples) >= 10
    assert {"fds", "threads", "rss_bytes", "sockets"} <= set(samples[-1]["nodes"]["n1"])
    assert samples[-1]["deployment"]["jetstream_consumers"] >= 3  # a lease watcher per node
    assert report["growing"] == []
    assert "Resources (" in done.stdout and "Recovery by kind" in done.stdout


def test_a_short_drill_of_three_nodes_of_two_workers_each_loses_nothing(tmp_path: Path) -> None:
    """Each node runs two worker processes, each a member of its own (``NODE/wI``): a worker
    SIGKILLed, a whole node SIGKILLed (its workers with it), paused past its lease and stopped
    gracefully, each healed and verified byte for byte."""
    report_path = tmp_path / "drill.json"
    faults = "worker_kill,kill,node_pause,node_leave"
    done = run_drill(
        "--spawn", "--nodes", "3", "--workers", "2", "--tier2", "s3", "--lease-ms", "2000",
        "--duration", "3", "--seed", "11", "--faults", faults, "--sample-s", "2",
        "--hold-s", "0.5", "1", "--segments", "6", "--writers", "6", "--readers", "1",
        "--max-recovery-s", "60", "--json", str(report_path),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-4000:]
    report = json.loads(report_path.read_text())
    assert {f["kind"] for f in report["faults"]} == set(faults.split(","))
    assert all(f["recovery_s"] is not None for f in report["faults"])
    node_faults = [f for f in report["faults"] if f["kind"] != "worker_kill"]
    assert all("settled again in" in f["note"] for f in node_faults), report["faults"]
    worker_kill = next(f for f in report["faults"] if f["kind"] == "worker_kill")
    assert re.search(r"n\d: worker [01] of 2 \(pid \d+\)", worker_kill["note"]), worker_kill
    # The whole node's kill named the containers its workers held.
    kill = next(f for f in report["faults"] if f["kind"] == "kill")
    assert re.search(r"held containers \[\d", kill["note"]), kill
    assert report["acknowledged"] > 0 and report["verified"] == report["acknowledged"]
    assert report["lost"] == report["torn"] == report["duplicated"] == 0
    assert report["exactly_once_failures"] == 0 and report["stale_acknowledged"] == 0
    assert report["passed"] is True
    # Each worker is sampled as a process of its own.
    assert {"n1/w0", "n1/w1"} <= {n for s in report["resources"]["samples"] for n in s["nodes"]}
