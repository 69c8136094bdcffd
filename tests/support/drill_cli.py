"""``segmentstore drill`` run as a user would: a process of its own, with none of the
caller's ``SEGMENTSTORE_`` settings, its output captured."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
STOP_TIMEOUT_S = 60  # a drill stopped by SIGTERM stops what it spawned first


def run_drill(*args: str, timeout_s: float = 240) -> subprocess.CompletedProcess[str]:
    """The drill's exit status and output. Past ``timeout_s`` it is stopped with SIGTERM, not
    killed: a SIGKILLed drill would leave its nodes, JetStream servers and mounts behind."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEGMENTSTORE_")}
    command = [sys.executable, "-m", "segmentstore.cli", "drill", *args]
    with subprocess.Popen(
        command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as drill:
        try:
            stdout, stderr = drill.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            drill.send_signal(signal.SIGTERM)
            try:
                stdout, stderr = drill.communicate(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                drill.kill()
                stdout, stderr = drill.communicate()
            raise subprocess.TimeoutExpired(command, timeout_s, stdout, stderr) from None
    return subprocess.CompletedProcess(command, drill.returncode, stdout, stderr)
