"""``segmentstore drill --spawn`` end to end: a short drill with real processes, a SIGKILL, a
torn Tier 1 tail and (where a tmpfs can be mounted) a full Tier 1, verified byte for byte."""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from drill_cli import run_drill

from segmentstore.harness.served_store import ServedStore


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
    assert "created 6 of 6 segments" in done.stdout
    if "tier1_full" in kinds:
        full = next(f for f in report["faults"] if f["kind"] == "tier1_full")
        assert "reads failed 0/" in full["note"], full


@pytest.mark.integration
def test_a_short_drill_of_a_node_of_two_workers_loses_nothing(tmp_path: Path) -> None:
    """``--workers 2``: a worker SIGKILLed is started again by its supervisor while the other
    serves on; the whole node SIGKILLed (its workers with it) and a torn tail recover as on a
    node of one process."""
    report_path = tmp_path / "drill.json"
    done = run_drill(
        "--spawn", "--workers", "2", "--duration", "6", "--seed", "7",
        "--faults", "worker_kill,kill,torn_tail", "--pause-s", "0.5", "1",
        "--segments", "8", "--writers", "8", "--readers", "1",
        "--max-recovery-s", "60", "--json", str(report_path),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    report = json.loads(report_path.read_text())
    assert {f["kind"] for f in report["faults"]} == {"worker_kill", "kill", "torn_tail"}
    assert all(f["recovery_s"] is not None for f in report["faults"])
    worker_kills = [f for f in report["faults"] if f["kind"] == "worker_kill"]
    assert all(re.search(r"worker [01] of 2 \(pid \d+\)", f["note"]) for f in worker_kills)
    assert report["acknowledged"] > 0 and report["verified"] == report["acknowledged"]
    assert report["lost"] == report["torn"] == report["duplicated"] == 0
    assert report["exactly_once_failures"] == 0 and report["passed"] is True


def _descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (from /proc: the parent of each)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended while we looked
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, pending = set(), [pid]
    while pending:
        for child in children.get(pending.pop(), []):
            found.add(child)
            pending.append(child)
    return found


def _as_a_background_job() -> None:
    """What a shell does to a job it starts with ``&`` (and so under nohup): SIGINT ignored."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.integration
@pytest.mark.parametrize("started", [None, _as_a_background_job], ids=["foreground", "background"])
def test_a_drill_stopped_by_sigterm_stops_what_it_spawned(
    tmp_path: Path, started: Callable[[], None] | None
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEGMENTSTORE_")}
    drill = subprocess.Popen(
        [sys.executable, "-m", "segmentstore.cli", "drill", "--spawn", "--duration", "300",
         "--faults", "kill", "--seed", "5"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=started,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        spawned: set[int] = set()
        while time.monotonic() < deadline and not any("serve" in _cmdline(pid) for pid in spawned):
            time.sleep(0.5)
            spawned = _descendants(drill.pid)
        assert any("serve" in _cmdline(pid) for pid in spawned), "the drill started no node"
        assert drill.stdout is not None
        while time.monotonic() < deadline:  # under load: stopped mid-drill, not while starting
            if select.select([drill.stdout], [], [], 1)[0] and "acked" in drill.stdout.readline():
                break
        spawned = _descendants(drill.pid)
        drill.send_signal(signal.SIGTERM)
        _, err = drill.communicate(timeout=60)
        assert drill.returncode == 130, err[-3000:]
        assert "stopped before its end" in err
        alive = [pid for pid in spawned if Path(f"/proc/{pid}").exists()]
        assert not alive, [_cmdline(pid) for pid in alive]
    finally:
        if drill.poll() is None:
            drill.kill()
            drill.wait()


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


@pytest.mark.integration
def test_a_drill_of_a_running_node_with_auth_sends_its_token(tmp_path: Path) -> None:
    """``--url`` with ``--token-file``: the load, the checks and a container restart (an admin
    call) all go through; without the token the drill cannot even create its segments."""
    token = "drill-admin-7f3e91"
    node = ServedStore(
        tmp_path / "data",
        tmp_path / "serve.log",
        {"SEGMENTSTORE_AUTH__TOKENS": json.dumps({token: "admin"})},
        environ=os.environ,
    )
    try:
        node.wait_ready(60)
        (tmp_path / "token").write_text(token + "\n")
        report_path = tmp_path / "drill.json"
        common = ("--url", node.url, "--duration", "3", "--faults", "container_restart",
                  "--segments", "4", "--writers", "2", "--readers", "1")  # fmt: skip
        done = run_drill(
            *common, "--token-file", str(tmp_path / "token"), "--json", str(report_path)
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        report = json.loads(report_path.read_text())
        assert [f["kind"] for f in report["faults"]] == ["container_restart"]
        assert report["acknowledged"] > 0 and report["lost"] == 0 and report["passed"]
        assert token not in done.stdout + done.stderr + report_path.read_text()

        refused = run_drill(*common)
        assert refused.returncode == 2, refused.stdout[-3000:] + refused.stderr[-3000:]
        assert "401" in refused.stderr and "unauthorized" in refused.stderr
    finally:
        node.stop()
