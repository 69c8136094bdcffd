"""``segmentstore bench client`` runs end to end (briefly, with the in-project load generator
so that it needs no wrk) and reports every figure as a ratio to the same run's baseline."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def test_client_bench_reports_ratios_to_the_baseline(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    completed = subprocess.run(
        [
            str(Path(sys.executable).parent / "segmentstore"),
            "bench",
            "client",
            "--seconds",
            "0.5",
            "--loadgen",
            "python",
            "--dir",
            str(tmp_path),
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-6000:]
    assert "append-to-read latency" in completed.stdout
    rows = {row["case"]: row for row in json.loads(out.read_text())["results"]}
    baseline = rows["python append 1 KiB x64"]
    assert baseline["vs_baseline"] == 1.0 and baseline["per_s"] > 0
    for case in (
        "client append 1 KiB x64",
        "bare aiohttp append 1 KiB x64",
        "client on httpx append 1 KiB x64",
        "EventWriter send() 1024 B x256",
        "EventWriter send() 1024 B x256, max_in_flight=1",
        "EventWriter send() 100 B x256",
        "EventWriter write() 1024 B x256",
        "EventWriter write() 1024 B x256, max_in_flight=1",
    ):
        assert rows[case]["per_s"] > 0
        assert rows[case]["vs_baseline"] == pytest.approx(rows[case]["per_s"] / baseline["per_s"])
    for case in ("EventWriter send() 1024 B x256", "EventWriter send() 100 B x256"):
        assert rows[case]["client_cpu_us_per_record"] > 0
        assert rows[case]["enqueue_us_per_record"] > 0
    assert rows["EventWriter write() 1024 B x256"]["client_cpu_us_per_record"] > 0
    # Each target is judged from this run's own figures (a half-second run need not meet it).
    for case, (key, least) in {
        "client append 1 KiB x64": ("vs_baseline", 0.8),
        "EventWriter send() 1024 B x256": ("per_s", 150_000),
        "EventWriter send() 100 B x256": ("per_s", 200_000),
        "EventWriter write() 1024 B x256": ("per_s", 150_000),
    }.items():
        assert rows[case]["met"] == (rows[case][key] >= least)
        assert rows[case]["target"] == f"{key} >= {least:,g}"
    assert len(rows["load average"]["before"]) == 3 == len(rows["load average"]["after"])
    assert "load average before:" in completed.stdout
    latency = rows["append-to-read latency"]
    assert 0 < latency["p50_ms"] <= latency["p99_ms"]
    assert list(tmp_path.iterdir()) == [out]  # its working directory is gone
