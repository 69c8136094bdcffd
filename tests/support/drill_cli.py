"""``segmentstore drill`` run as a user would: a process of its own, with none of the
caller's ``SEGMENTSTORE_`` settings, its output captured."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_drill(*args: str, timeout_s: float = 240) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEGMENTSTORE_")}
    return subprocess.run(
        [sys.executable, "-m", "segmentstore.cli", "drill", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
