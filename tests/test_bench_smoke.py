"""`segmentstore bench append`, `bench read`, `bench http` and `bench segments` run end to end
(briefly) and report what they promise."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from debian_packages import require


def _bench(tmp_path: Path, *args: str) -> tuple[str, list[dict[str, Any]]]:
    """Runs ``segmentstore bench ARGS`` in ``tmp_path/work`` (which it makes): what it printed,
    and its JSON rows."""
    out = tmp_path / "bench.json"
    work = tmp_path / "work"
    command = str(Path(sys.executable).parent / "segmentstore")
    completed = subprocess.run(
        [command, "bench", *args, "--dir", str(work), "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-6000:]
    assert list(work.iterdir()) == []  # its working directory is gone
    return completed.stdout, json.loads(out.read_text())["results"]


def test_append_bench_reports_medians_and_ratio(tmp_path: Path) -> None:
    stdout, results = _bench(
        tmp_path, "append", "--sizes", "1k", "--writers", "4", "--seconds", "0.3", "--rounds", "2"
    )
    assert "round 2/2: bare append path" in stdout
    (row,) = results
    assert row["size_bytes"] == 1024 and row["writers"] == 4
    assert 0 < row["appends_per_s_min"] <= row["appends_per_s"] <= row["appends_per_s_max"]
    assert row["ratio"] == row["appends_per_s"] / row["raw_records_per_s"]
    assert row["bare_ratio"] == row["appends_per_s"] / row["bare_appends_per_s"]


def test_read_bench_reports_cached_tail_and_missing_reads(tmp_path: Path) -> None:
    stdout, results = _bench(tmp_path, "read", "--seconds", "0.1", "--appends", "10")
    assert "checksums on and off in turns" in stdout
    cached, tails, misses = results[:2], results[2:4], results[4:]
    assert [r["size_bytes"] for r in cached] == [4096, 1 << 20]
    assert all(r["ratio"] == r["store_mb_s"] / r["copy_mb_s"] for r in cached)
    assert [r["readers"] for r in tails] == [1, 100]
    assert all(0 < r["p50_ms"] <= r["p99_ms"] for r in tails)
    on, off = misses
    assert on["case"] == "tier2 miss, checksums on" and off["ratio"] == 1.0
    assert on["ratio"] == on["mb_s"] / off["mb_s"] and off["mb_s"] > 0


@pytest.mark.slow
def test_http_bench_reports_cpu_and_ratios_to_both_baselines(tmp_path: Path) -> None:
    stdout, results = _bench(
        tmp_path, "http", "--cases", "append-1k", "--seconds", "0.5", "--rounds", "2",
        "--loadgen", "python",
    )  # fmt: skip
    assert "round 2/2" in stdout and "goals (on the medians)" in stdout
    rows = {row["case"]: row for row in results}
    append = rows["append-1k"]
    assert append["rounds"] == 2
    for target in ("store", "fastapi", "asgi"):
        assert append[f"{target}_req_per_s"] > 0 and append[f"{target}_failures"] == 0
        assert 0 < append[f"{target}_cpu_us_per_req"] < 1e6
    assert append["store_vs_asgi"] > 0 and append["store_vs_fastapi"] > 0
    assert append["store_req_per_s_min"] <= append["store_req_per_s"]
    assert {g["figure"] for g in append["goals"]} == {"store_vs_fastapi", "store_vs_asgi"}
    assert 0 < rows["tail"]["p50_ms"] <= rows["tail"]["p99_ms"]
    assert len(rows["load average"]["samples"]) == 3


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["http", "client"])
def test_workers_benches_compare_each_count_with_one_worker_in_the_same_rounds(
    tmp_path: Path, kind: str
) -> None:
    if kind == "http":
        require("wrk", "wrk")  # the load generator a user of `bench http` runs
    stdout, results = _bench(
        tmp_path, kind, "--workers", "1,2", "--seconds", "0.5", "--rounds", "2",
        *(["--loadgen", "wrk"] if kind == "http" else []),
    )  # fmt: skip
    assert "round 2/2" in stdout and "ratios to 1 worker" in stdout
    rows = [row for row in results if row["case"] != "load average"]
    loads = {"http": {"http-append-1k"}, "client": {"client-append-1k", "writer-send-1k"}}[kind]
    assert {row["case"] for row in rows} == loads
    for case in loads:
        one, two = (
            next(r for r in rows if r["case"] == case and r["workers"] == n) for n in (1, 2)
        )
        assert one["per_s"] > 0 and two["per_s"] > 0 and 0 < one["cpu_us"] < 1e6
        assert "per_s_ratio" not in one  # the baseline
        assert two["per_s_ratio_min"] <= two["per_s_ratio"] <= two["per_s_ratio_max"]
        assert two["cpu_ratio_min"] <= two["cpu_ratio"] <= two["cpu_ratio_max"]
        assert two["goals"] and all(g["value"] == two[g["figure"]] for g in two["goals"])


@pytest.mark.slow
def test_segments_bench_measures_each_size_against_the_smallest(tmp_path: Path) -> None:
    fast = {"metadata": {"idle_eviction_ms": 500}, "storage_writer": {"flush_interval_ms": 100}}
    stdout, results = _bench(
        tmp_path, "segments", "--segments", "600,300", "--settings", json.dumps(fast)
    )
    assert "waiting for idle eviction" in stdout or "created in" in stdout
    recoveries = [line for line in stdout.splitlines() if "recovered after SIGKILL in" in line]
    assert len(recoveries) == 2 and all(line.count(" s") == 3 for line in recoveries)
    assert [row["segments"] for row in results] == [300, 600]
    for row in results:
        assert row["creation_per_s"] > 0 and row["recovery_s"] > 0
        assert 0 < row["rss_after_eviction_mib"] < 1000
        assert row["tier2_objects_per_segment"] >= 2  # a chunk and a manifest each, at least
        assert 0 < row["list_prefix_ms"] < 10_000
        assert row["spark_plan_objects_read"] <= 10
        assert row["tier1_bytes_per_segment"] > 100  # its 100-byte append, and its creation
    table = stdout[stdout.index("Tier 2 objects per segment") :].splitlines()[0]
    assert "x)" in table  # the larger size's figure, as a ratio to the smaller's
