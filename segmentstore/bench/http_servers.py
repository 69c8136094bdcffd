"""The servers of ``segmentstore bench http`` and ``bench client``: child processes on loopback.

Each serves on port 0 and is found by its log line; each is built by
:func:`segmentstore.api.server.server_config` (uvicorn with httptools and uvloop, access log
off, one worker), as ``segmentstore serve`` is. :meth:`ServerProcess.cpu_s` reads the CPU
time the child (all its threads) has used so far, from ``/proc``.
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
from typing import IO

import httpx

from segmentstore.bench.http_cases import READ_SEGMENT_MIB, SEGMENTS, TAIL_SEGMENT, MiB, payload
from segmentstore.client import SegmentStoreClient

REPO = Path(__file__).resolve().parents[2]
STARTUP_TIMEOUT_S = 60.0
QUIET_TIMEOUT_S = 60.0
# uvicorn's own line for a port it bound (the baselines), or the store's for the one it binds
# itself before it starts.
_RUNNING_ON = re.compile(r"(?:Uvicorn running on|listening on) http://127\.0\.0\.1:(\d+)")

# -- the servers ----------------------------------------------------------------------------


class ServerProcess:
    """A child serving HTTP on loopback port 0; the port is read from uvicorn's log line."""

    def __init__(
        self, label: str, argv: list[str], log_path: Path, environ: Mapping[str, str]
    ) -> None:
        self.label = label
        # The store gets the defaults of `segmentstore serve`, not this shell's settings.
        env = {k: v for k, v in environ.items() if not k.startswith("SEGMENTSTORE_")}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
        self._log_path = log_path
        self._proc = subprocess.Popen(
            argv,
            cwd=REPO,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        self.port: int | None = None
        self._started = threading.Event()
        assert self._proc.stderr is not None
        self._reader = threading.Thread(
            target=self._drain, args=(self._proc.stderr,), name=f"{label}-log", daemon=True
        )
        self._reader.start()

    def _drain(self, stream: IO[bytes]) -> None:
        # Drained to the end so that a chatty child never blocks on a full pipe.
        with open(self._log_path, "ab") as log:
            for line in stream:
                log.write(line)
                found = _RUNNING_ON.search(line.decode("utf-8", "replace"))
                if found and self.port is None:
                    self.port = int(found.group(1))
                    self._started.set()
        self._started.set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def wait_ready(self) -> None:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        self._started.wait(STARTUP_TIMEOUT_S)
        with httpx.Client(timeout=5) as http:
            while self.port is not None and self._proc.poll() is None:
                try:
                    if http.get(f"{self.url}/readyz").status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    break
                time.sleep(0.05)
        tail = self._log_path.read_text(errors="replace")[-3000:]
        raise RuntimeError(f"the {self.label} server did not become ready:\n{tail}")

    def cpu_s(self) -> float:
        """CPU seconds (user and system, every thread) the child has used so far; NaN where
        there is no ``/proc``."""
        try:
            with open(f"/proc/{self._proc.pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            return float("nan")
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._reader.join(timeout=30)
        if self._proc.stderr is not None and not self._reader.is_alive():
            self._proc.stderr.close()


def store_process(base: Path, environ: Mapping[str, str]) -> ServerProcess:
    """``segmentstore serve`` with its defaults over ``base/data``, on a loopback port (not yet
    ready: call ``wait_ready``)."""
    serve = ["serve", "--data-dir", str(base / "data"), "--host", "127.0.0.1", "--port", "0"]
    return ServerProcess(
        "store",
        [sys.executable, "-m", "segmentstore.cli", *serve],
        base / "store.log",
        environ,
    )


def start_servers(base: Path, environ: Mapping[str, str]) -> dict[str, ServerProcess]:
    """The store and the two bare baselines (``fastapi``, ``asgi``), ready."""
    servers = {"store": store_process(base, environ)}
    # The baselines are a program of their own in api/ (the core never imports FastAPI).
    for kind in ("fastapi", "asgi"):
        argv = [sys.executable, "-m", "segmentstore.api.bench_baseline", kind]
        servers[kind] = ServerProcess(kind, argv, base / f"{kind}.log", environ)
    try:
        for server in servers.values():
            server.wait_ready()
    except BaseException:
        for server in servers.values():
            server.stop()
        raise
    return servers


def wait_quiet(store_url: str) -> None:
    """Until the store's Tier 2 lag stops shrinking (or is gone): its Storage Writer is
    done with what the last case appended."""
    deadline = time.monotonic() + QUIET_TIMEOUT_S
    previous = -1
    with httpx.Client(base_url=store_url, timeout=30) as http:
        while time.monotonic() < deadline:
            lag = sum(c["tier2_lag_bytes"] for c in http.get("/v1/containers").json()["containers"])
            if lag == 0 or lag == previous:
                return
            previous = lag
            time.sleep(0.5)


def settle_disk() -> None:
    """Until the kernel has written back every dirty page: a measurement then does not pay
    for the writes of the one before it (a case of 1 MiB appends leaves gigabytes behind,
    and their writeback slows every fsync of the next case for seconds)."""
    os.sync()


def prepare_store(url: str) -> None:
    """The segments the cases append to, one of READ_SEGMENT_MIB MiB to read from, and the
    one whose tail is read."""
    with SegmentStoreClient(url) as client:
        for i in range(SEGMENTS):
            client.create_segment(f"bench/http-{i:02d}")
        client.create_segment(TAIL_SEGMENT)
        client.create_segment("bench/read")
        block = payload(MiB, seed=1)
        for _ in range(READ_SEGMENT_MIB):
            client.append("bench/read", block)
