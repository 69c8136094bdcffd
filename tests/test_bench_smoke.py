"""`segmentstore bench append` runs end to end (briefly) and reports what it promises."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def test_append_bench_reports_medians_and_ratio(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    completed = subprocess.run(
        [
            str(Path(sys.executable).parent / "segmentstore"),
            "bench",
            "append",
            "--sizes",
            "1k",
            "--writers",
            "4",
            "--seconds",
            "0.3",
            "--rounds",
            "2",
            "--dir",
            str(tmp_path),
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert "round 2/2: bare append path" in completed.stdout
    (row,) = json.loads(out.read_text())["results"]
    assert row["size_bytes"] == 1024 and row["writers"] == 4
    assert 0 < row["appends_per_s_min"] <= row["appends_per_s"] <= row["appends_per_s_max"]
    assert row["ratio"] == row["appends_per_s"] / row["raw_records_per_s"]
    assert row["bare_ratio"] == row["appends_per_s"] / row["bare_appends_per_s"]
    assert list(tmp_path.iterdir()) == [out]  # its working directory is gone
