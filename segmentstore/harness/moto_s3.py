"""S3 for a spawned drill's Tier 2: a moto server in a child process of its own, on a port
chosen once, so that it can be stopped for an outage and started again where the nodes look for
it (moto keeps its objects in that process meanwhile).

A process of its own, not a thread of the drill: the drill's load and its verification reads
keep its own interpreter busy, and a moto server sharing it would answer the nodes' Tier 2
requests late, a slowness no real S3 has.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from segmentstore.loopback import free_port

_S3_OPTIONS = {"access_key": "drill", "secret_key": "drill", "region": "us-east-1"}
URI = "s3://segmentstore-drill/tier2"


class MotoTier2:
    def __init__(self) -> None:
        self.port = free_port()
        self._process: subprocess.Popen[str] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def options(self) -> dict[str, Any]:
        """The Tier 2 options that reach this server."""
        return {"endpoint_url": self.endpoint, "create_bucket": True, **_S3_OPTIONS}

    def start(self) -> None:
        """Serve (again): the objects stored before a :meth:`stop` are still there."""
        if self._process is None:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "segmentstore.drill.moto_process", str(self.port)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
        self._command("start")

    def stop(self) -> None:
        """Stop serving (connections are refused) until the next :meth:`start`."""
        if self._process is not None:
            self._command("stop")

    def close(self) -> None:
        """End the server's process, and with it every object; by PID, at once if it hangs."""
        process, self._process = self._process, None
        if process is None:
            return
        assert process.stdin is not None and process.stdout is not None
        process.stdin.close()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        process.stdout.close()

    def _command(self, word: str) -> None:
        process = self._process
        assert process is not None and process.stdin is not None and process.stdout is not None
        process.stdin.write(word + "\n")
        process.stdin.flush()
        answer = process.stdout.readline().strip()
        if answer != word:
            raise RuntimeError(f"the moto S3 process did not {word} (exit code {process.poll()})")
