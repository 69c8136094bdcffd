"""A check that runs out of time leaves nothing running: the mutants' drills start nodes of
their own, which must not outlive the check (they once kept running after ``make mutants``)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from mutant_catalog import Check
from mutants import run_check

# A check that starts a process of its own and then waits far past its time.
_STARTS_AND_WAITS = (
    "import subprocess, sys, time\n"
    "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
    "print(child.pid, flush=True)\n"
    "time.sleep(600)\n"
)


def _running(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "State:\tZ" not in status  # a zombie is dead, waiting for its parent to reap it


def test_a_check_out_of_time_is_stopped_with_what_it_started(tmp_path: Path) -> None:
    check = Check("waits", (sys.executable, "-c", _STARTS_AND_WAITS))
    begun = time.monotonic()
    status, output = run_check(check, tmp_path, 1.0)
    assert status is None and time.monotonic() - begun < 10
    child = int(output.split()[0])
    deadline = time.monotonic() + 5
    while _running(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(child)


def test_a_check_that_ends_gives_its_status_and_output(tmp_path: Path) -> None:
    check = Check("fails", (sys.executable, "-c", "print('seen'); raise SystemExit(1)"))
    assert run_check(check, tmp_path, 30) == (1, "seen\n")
