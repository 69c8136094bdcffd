"""SIGTERM stops a real ``api.server.serve`` process gracefully, well within 30 s, with the
store closed (docs/api.md, Details), even while a tail read is waiting for 60 s."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from readiness import wait_ready

from segmentstore import SegmentStore

REPO = Path(__file__).resolve().parents[2]
SERVER = """
import asyncio, socket, sys
from segmentstore.api.server import serve
from segmentstore import SegmentStore

listener = socket.socket()
listener.bind(("127.0.0.1", 0))
print(listener.getsockname()[1], flush=True)
store = SegmentStore.open(sys.argv[1], containers=4, cache={"max_bytes": 64 << 20})
asyncio.run(serve(store, sockets=[listener], graceful_timeout_s=2))
"""


@contextmanager
def _server_process(data_dir: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """The server in a process of its own; killed if a failing test leaves it running."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with subprocess.Popen(
        [sys.executable, "-c", SERVER, str(data_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    ) as process:
        try:
            assert process.stdout is not None
            url = f"http://127.0.0.1:{int(process.stdout.readline())}"
            wait_ready(url)
            yield process, url
        finally:
            if process.poll() is None:
                process.kill()


@pytest.mark.integration
def test_sigterm_stops_gracefully_and_keeps_acknowledged_data(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    outcome: list[object] = []
    with _server_process(data_dir) as (process, url), httpx.Client(base_url=url) as http:
        assert http.put("/v1/segments/s/0").status_code == 201
        assert http.post("/v1/segments/s/0:append", content=b"durable").status_code == 200

        def tail_read() -> None:
            try:
                params = {"offset": 7, "wait_ms": 60000}
                outcome.append(http.get("/v1/segments/s/0:read", params=params, timeout=60))
            except httpx.TransportError as error:
                outcome.append(error)  # cut off by the graceful-shutdown timeout

        reader = threading.Thread(target=tail_read)
        reader.start()
        time.sleep(0.3)  # the read is parked at the tail
        started = time.monotonic()
        process.send_signal(signal.SIGTERM)
        _, log = process.communicate(timeout=30)
        stopped_in = time.monotonic() - started
        reader.join(timeout=30)
    assert stopped_in < 15, stopped_in
    assert outcome, "the tail read never ended"
    (answer,) = outcome
    if isinstance(answer, httpx.Response):  # cut off, it is told to come back: never a 500
        assert answer.status_code == 503, answer.text
        assert answer.json()["error"]["code"] == "container_unavailable"
        assert "retry-after" in answer.headers
    # uvicorn re-raises the signal it handled once the shutdown is complete.
    assert process.returncode in (0, -signal.SIGTERM)
    assert "Application shutdown complete" in log  # after the lifespan closed the store

    async def reopen() -> bytes:
        async with SegmentStore.open(data_dir, containers=4) as store:
            return bytes(await store.read("s/0", 0))

    assert asyncio.run(reopen()) == b"durable"
