"""``segmentstore serve`` (or any HTTP server of the project) as a child process on a free
loopback port, for the tests and benchmarks that kill it or measure it.

The server is asked for port 0 and the port the kernel gave it is read from uvicorn's
"Uvicorn running on" line, so no free port is guessed and raced for. Its log goes to a file
(and is kept in memory) so a failing test can show it.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[2]
_RUNNING_ON = re.compile(r"(?:Uvicorn running on|listening on) (https?)://127\.0\.0\.1:(\d+)")


def child_environment(
    environ: Mapping[str, str], settings: Mapping[str, str] | None = None
) -> dict[str, str]:
    """``environ`` less its segment store settings (a child gets the defaults of ``segmentstore
    serve``, not this shell's), the clone on its ``PYTHONPATH``, and ``settings`` on top."""
    env = {k: v for k, v in environ.items() if not k.startswith("SEGMENTSTORE_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    env.update(settings or {})
    return env


class ServedStore:
    """One ``segmentstore serve`` process over ``data_dir``; ``settings`` become
    ``SEGMENTSTORE_<SECTION>__<KEY>`` variables and ``args`` more flags of ``serve``.

    ``environ`` is the environment it starts from, less its segment store settings.
    :meth:`launch` starts a server from a command line and environment given whole (a pod's,
    as a Helm chart renders it, or a benchmark's baseline); that server must listen on
    127.0.0.1."""

    def __init__(
        self,
        data_dir: Path,
        log_path: Path,
        settings: dict[str, str] | None = None,
        args: list[str] | None = None,
        *,
        environ: Mapping[str, str],
    ) -> None:
        env = child_environment(environ, settings)
        command = [sys.executable, "-m", "segmentstore.cli", "serve", "--data-dir", str(data_dir)]
        command += ["--host", "127.0.0.1", "--port", "0", *(args or [])]
        self._start(command, env, REPO, log_path)

    @classmethod
    def launch(
        cls, command: list[str], env: dict[str, str], cwd: Path, log_path: Path
    ) -> ServedStore:
        served = cls.__new__(cls)
        served._start(command, env, cwd, log_path)
        return served

    def _start(self, command: list[str], env: dict[str, str], cwd: Path, log_path: Path) -> None:
        self.log_path = log_path
        self._log = open(log_path, "ab")  # noqa: SIM115 (closed by the reader thread)
        self.proc = subprocess.Popen(
            command,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        self.port: int | None = None
        self.scheme = "http"
        self._port_known = threading.Event()
        self._reader = threading.Thread(target=self._read_log, name="serve-log", daemon=True)
        self._reader.start()

    def _read_log(self) -> None:
        assert self.proc.stderr is not None
        try:
            for line in self.proc.stderr:
                self._log.write(line)
                self._log.flush()
                if self.port is None:
                    found = _RUNNING_ON.search(line.decode("utf-8", "replace"))
                    if found:
                        self.scheme = found.group(1)
                        self.port = int(found.group(2))
                        self._port_known.set()
        finally:
            self._log.close()
            self._port_known.set()  # EOF: wake the waiter, who then sees the process is gone

    @property
    def url(self) -> str:
        assert self.port is not None, "the server has not started"
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-5000:]

    def wait_listening(self, timeout_s: float) -> str:
        """Until the server listens (it may not be ready yet); its URL."""
        if not self._port_known.wait(timeout_s) or self.port is None:
            raise RuntimeError(f"the server did not start (exit {self.proc.poll()}):\n{self.log()}")
        return self.url

    def wait_ready(self, timeout_s: float, **client_options: Any) -> None:
        """Until ``/readyz`` answers 200 (every container recovered); ``client_options`` go
        to the httpx client that asks (``verify=`` for HTTPS)."""
        deadline = time.monotonic() + timeout_s
        self.wait_listening(timeout_s)
        with httpx.Client(base_url=self.url, timeout=5, **client_options) as http:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(
                        f"the server exited with {self.proc.returncode}:\n{self.log()}"
                    )
                try:
                    if http.get("/readyz").status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                time.sleep(0.05)
        raise RuntimeError(f"the server was not ready in {timeout_s} s:\n{self.log()}")

    def cpu_s(self) -> float:
        """CPU seconds (user and system, every thread) the server has used so far; NaN where
        there is no ``/proc``."""
        try:
            with open(f"/proc/{self.proc.pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            return float("nan")
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def sigkill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        assert self.proc.wait(timeout=30) == -signal.SIGKILL, self.proc.returncode
        self._finish()

    def stop(self, timeout_s: float = 30) -> int:
        """SIGTERM, then SIGKILL if it has not ended in ``timeout_s``; the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._finish()
        return self.proc.returncode

    def _finish(self) -> None:
        # The reader must be done with the pipe before it is closed under it.
        self._reader.join(timeout=30)
        if self.proc.stderr is not None and not self._reader.is_alive():
            self.proc.stderr.close()
