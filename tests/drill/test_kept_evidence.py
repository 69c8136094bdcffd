"""A drill that fails, or cannot finish, keeps what its deployment logged and stored, and says
where: that is all a person has to find out why. One that passes leaves nothing behind."""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
from pathlib import Path

import drill_cli
import pytest

from segmentstore.drill.report import DrillReport
from segmentstore.drill.runner import DrillOptions, run_drill


class _BrokenDeployment:
    """A deployment whose start fails half-way (its node never answers)."""

    shape = "node"
    url = "http://127.0.0.1:9"

    def __init__(self, work_dir: Path) -> None:
        self.unavailable: dict[str, str] = {}
        self.work_dir = work_dir
        self.closed_with: list[bool] = []

    async def start(self) -> None:
        (self.work_dir / "node-1.log").write_text("the node's last words\n")
        raise RuntimeError("node-1 did not start")

    async def close(self, keep: bool = False) -> Path | None:
        self.closed_with.append(keep)
        return self.work_dir if keep else None


def test_a_drill_that_cannot_finish_keeps_its_deployment_and_says_where(tmp_path: Path) -> None:
    deployment = _BrokenDeployment(tmp_path)
    said: list[str] = []

    def progress(event: str, report: DrillReport, elapsed_s: float) -> None:
        said.append(event)

    options = DrillOptions(duration_s=1, seed=1, faults=("kill",))
    with pytest.raises(RuntimeError, match="did not start"):
        asyncio.run(run_drill(deployment, options, progress))  # type: ignore[arg-type]
    assert deployment.closed_with == [True]
    assert said == [f"kept the deployment's logs and data in {tmp_path}"]
    assert (tmp_path / "node-1.log").exists()


@pytest.mark.integration
def test_a_drill_that_fails_keeps_the_node_log_and_its_disks(tmp_path: Path) -> None:
    # Failed on purpose: no restart heals within a millisecond.
    report_path = tmp_path / "drill.json"
    done = drill_cli.run_drill(
        "--spawn", "--duration", "2", "--seed", "3", "--faults", "kill",
        "--segments", "4", "--writers", "4", "--readers", "0",
        "--max-recovery-s", "0.001", "--json", str(report_path),
    )  # fmt: skip
    report = json.loads(report_path.read_text())
    kept = Path(report["kept"])
    try:
        assert done.returncode == 1 and report["passed"] is False, done.stdout[-3000:]
        assert f"kept the deployment's logs and data in {kept}" in done.stdout
        assert "serving" in (kept / "node-1.log").read_text()
        if (kept / "node-1.kept").exists():  # Tier 1 was on a small disk, gone once unmounted
            assert list((kept / "node-1.kept").rglob("*.log")), "the Tier 1 files were not kept"
    finally:
        shutil.rmtree(kept, ignore_errors=True)


@pytest.mark.integration
def test_a_drill_that_passes_leaves_nothing_behind(tmp_path: Path) -> None:
    before = set(Path(tempfile.gettempdir()).glob("segmentstore-drill-*"))
    report_path = tmp_path / "drill.json"
    done = drill_cli.run_drill(
        "--spawn", "--duration", "2", "--seed", "3", "--faults", "kill",
        "--segments", "4", "--writers", "4", "--readers", "0", "--json", str(report_path),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert json.loads(report_path.read_text())["kept"] is None
    assert set(Path(tempfile.gettempdir()).glob("segmentstore-drill-*")) <= before
