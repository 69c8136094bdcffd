"""S3 on loopback, from moto: in a child process of its own (:class:`MotoTier2`), or in a
thread of this process (:class:`MotoServer`).

:class:`MotoTier2`, a spawned drill's Tier 2, listens on a port chosen once, so that it can be
stopped for an outage and started again where the nodes look for it (moto keeps its objects in
that process meanwhile). A process of its own, not a thread of the drill: the drill's load and
its verification reads keep its own interpreter busy, and a moto server sharing it would answer
the nodes' Tier 2 requests late, a slowness no real S3 has.

:class:`MotoServer` is the tests' S3: a moto server on a free port of this process, started
at once and stopped by :meth:`MotoServer.stop` (also as a context manager).
"""

from __future__ import annotations

import subprocess
import sys
from types import TracebackType
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
                [sys.executable, "-m", "segmentstore.harness.moto_process", str(self.port)],
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


class MotoServer:
    """A moto S3 server in a thread of this process, on a free port of 127.0.0.1."""

    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer  # the drill or dev extra

        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"
        self._running = True

    def stop(self) -> None:
        if self._running:
            self._running = False
            self._server.stop()

    def __enter__(self) -> MotoServer:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
