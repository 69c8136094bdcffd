"""One ``segmentstore serve`` process that the drill starts, kills and starts again.

It listens on a port chosen once, so that clients find it again at the same address after a
restart, and logs to a file in the drill's directory. Its settings come from a config file the
drill writes (JSON, which the YAML reader takes), so nothing depends on the environment.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from segmentstore.loopback import free_port


class SpawnedNode:
    def __init__(self, name: str, data_dir: Path, work_dir: Path, settings: dict[str, Any]) -> None:
        self.name = name
        self.data_dir = data_dir
        self.port = free_port()
        self.config = work_dir / f"{name}.yaml"
        self.config.write_text(json.dumps(settings, indent=1))
        self.log_path = work_dir / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [
                    sys.executable, "-m", "segmentstore.cli", "serve",
                    "--config", str(self.config), "--data-dir", str(self.data_dir),
                    "--host", "127.0.0.1", "--port", str(self.port),
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )  # fmt: skip

    def wait_listening(self, timeout_s: float) -> None:
        """Until the node answers ``/healthz`` (its containers may still be recovering)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                raise RuntimeError(f"node {self.name} exited:\n{self.log_tail()}")
            try:
                if httpx.get(self.url + "/healthz", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"node {self.name} did not answer in {timeout_s} s:\n{self.log_tail()}")

    def sigkill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self, timeout_s: float = 30) -> None:
        """SIGTERM, then SIGKILL if it has not ended in ``timeout_s``."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.sigkill()

    def log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except FileNotFoundError:
            return ""
