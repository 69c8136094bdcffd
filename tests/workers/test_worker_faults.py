"""A node of two workers under the faults a process meets: a worker SIGKILLed (started again
at once, the other serving on, its containers ``503`` with ``Retry-After`` meanwhile, never a
hang), the supervisor SIGKILLed (the workers die with it, no lock left held), SIGTERM (every
worker stops cleanly), and a node that cannot start (one line, nothing started)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from segmentstore.contracts.mapping import container_of
from segmentstore.harness.served_store import REPO, ServedStore, child_environment

pytestmark = pytest.mark.integration

CONTAINERS = 4
SETTINGS = {"SEGMENTSTORE_CACHE__MAX_BYTES": str(64 << 20)}


def names_per_container() -> dict[int, str]:
    found: dict[int, str] = {}
    for i in range(100):
        found.setdefault(container_of(f"faults/{i}", CONTAINERS), f"faults/{i}")
    return found


def start(data_dir: Path, log: Path) -> ServedStore:
    node = ServedStore(data_dir, log, SETTINGS, ["--containers", str(CONTAINERS)], environ={},
                       workers=2)  # fmt: skip
    try:
        node.wait_ready(60)
    except BaseException:
        node.stop()
        raise
    return node


def worker_pids(node: ServedStore) -> dict[str, int]:
    """Worker name -> its latest pid, from the supervisor's lines."""
    return {
        name: int(pid)
        for name, pid in re.findall(
            r"worker (w\d) started \(pid (\d+)\)", node.log_path.read_text()
        )
    }


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture
def node(tmp_path: Path) -> ServedStore:
    served = start(tmp_path / "data", tmp_path / "node.log")
    yield served
    served.stop()


def test_a_killed_worker_is_started_again_while_the_other_serves_on(node: ServedStore) -> None:
    names = names_per_container()
    acknowledged: dict[str, bytearray] = {name: bytearray() for name in names.values()}
    with httpx.Client(base_url=node.url, timeout=10) as http:
        for name in names.values():
            assert http.put(f"/v1/segments/{name}").status_code == 201
            assert http.post(f"/v1/segments/{name}:append", content=b"before").status_code == 200
            acknowledged[name] += b"before"
        victim = worker_pids(node)["w1"]
        os.kill(victim, signal.SIGKILL)
        answers: dict[int, set[int]] = {c: set() for c in names}
        restarted_at = None
        begun = time.monotonic()
        while time.monotonic() - begun < 60:
            for container, name in names.items():
                started = time.monotonic()
                try:
                    r = http.post(f"/v1/segments/{name}:append", content=b"during")
                except httpx.TimeoutException:
                    pytest.fail(f"a request for container {container} hung")
                except httpx.TransportError:
                    continue  # a connection that was on its way to the worker as it died
                assert time.monotonic() - started < 5, "an answer took seconds: a hang"
                answers[container].add(r.status_code)
                if r.status_code == 200:
                    acknowledged[name] += b"during"
                else:
                    assert r.status_code == 503, r.text
                    assert r.json()["error"]["code"] == "container_unavailable"
                    assert int(r.headers["Retry-After"]) >= 1
            pids = worker_pids(node)
            if pids["w1"] != victim and restarted_at is None:
                restarted_at = time.monotonic() - begun
            if restarted_at is not None and http.get("/readyz").status_code == 200:
                break
            time.sleep(0.02)
        assert restarted_at is not None and restarted_at < 5, node.log()
        assert http.get("/readyz").status_code == 200
        for container, name in names.items():  # ready: every container answers again
            r = http.post(f"/v1/segments/{name}:append", content=b"after")
            answers[container].add(r.status_code)
            if r.status_code == 200:
                acknowledged[name] += b"after"
        # w0's containers (0, 2) never stopped answering; w1's (1, 3) were 503 meanwhile.
        for container in (0, 2):
            assert answers[container] == {200}, answers
        for container in (1, 3):
            assert 503 in answers[container] and 200 in answers[container], answers
        for name, data in acknowledged.items():
            read = http.get(f"/v1/segments/{name}:read", params={"offset": 0})
            assert read.content == bytes(data), name
        metrics = http.get("/metrics").text
    assert 'segmentstore_worker_starts_total{worker="w1"} 2.0' in metrics
    assert 'segmentstore_worker_starts_total{worker="w0"} 1.0' in metrics
    assert "was killed by SIGKILL" in node.log()


def test_the_supervisors_death_takes_the_workers_with_it(tmp_path: Path) -> None:
    first = start(tmp_path / "data", tmp_path / "first.log")
    name = names_per_container()[1]
    with httpx.Client(base_url=first.url, timeout=10) as http:
        assert http.put(f"/v1/segments/{name}").status_code == 201
        assert http.post(f"/v1/segments/{name}:append", content=b"kept").status_code == 200
    workers = list(worker_pids(first).values())
    first.sigkill()
    deadline = time.monotonic() + 5
    while any(alive(pid) for pid in workers):
        assert time.monotonic() < deadline, "a worker outlived its supervisor"
        time.sleep(0.01)
    # No orphan holds a container's Tier 1 lock: a new node takes every container at once.
    second = start(tmp_path / "data", tmp_path / "second.log")
    try:
        with httpx.Client(base_url=second.url, timeout=10) as http:
            assert http.get(f"/v1/segments/{name}:read", params={"offset": 0}).content == b"kept"
            assert {c["status"] for c in http.get("/v1/containers").json()["containers"]} == {
                "running"
            }
    finally:
        second.stop()


def test_sigterm_stops_every_worker_cleanly(tmp_path: Path) -> None:
    node = start(tmp_path / "data", tmp_path / "node.log")
    workers = list(worker_pids(node).values())
    assert node.stop() == -signal.SIGTERM
    assert not any(alive(pid) for pid in workers)
    log = node.log_path.read_text()
    for worker in ("w0", "w1"):
        assert re.search(rf"\[{worker}\] segmentstore\.api\.server: closing the store", log), log
        assert re.search(rf"\[{worker}\] uvicorn\.error: Finished server process", log), log
    assert "did not stop" not in log


def test_a_node_paused_and_woken_serves_on(tmp_path: Path) -> None:
    """SIGSTOP then SIGCONT, as a paused VM or a drill's node_pause: Linux ends the
    supervisor's wait for signals early (EINTR) on waking, and Python then answers it with
    a record of no signal; the supervisor must take that for the timeout it is."""
    node = start(tmp_path / "data", tmp_path / "node.log")
    try:
        node.proc.send_signal(signal.SIGSTOP)
        time.sleep(2.5)  # past the supervisor's longest wait (1 s)
        node.proc.send_signal(signal.SIGCONT)
        time.sleep(1.5)
        assert node.proc.poll() is None, node.log()
        with httpx.Client(base_url=node.url, timeout=10) as http:
            for name in names_per_container().values():
                assert http.put(f"/v1/segments/{name}").status_code == 201
        assert "Traceback" not in node.log() and "stopping" not in node.log(), node.log()
    finally:
        assert node.stop() == -signal.SIGTERM, node.log()


def serve(args: list[str], data_dir: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "segmentstore.cli", "serve", "--data-dir", str(data_dir)]
    return subprocess.run(
        [*command, "--host", "127.0.0.1", "--workers", "2", *args],
        env=child_environment(os.environ),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_port_in_use_touches_no_data_directory(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        done = serve(["--port", str(port)], tmp_path / "data")
    assert done.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "data").exists()


def test_a_node_that_cannot_start_starts_no_worker(tmp_path: Path) -> None:
    node = start(tmp_path / "data", tmp_path / "node.log")
    node.stop()
    done = serve(["--port", "0", "--containers", "8"], tmp_path / "data")  # it has 4
    assert done.returncode == 1, done.stderr
    lines = [line for line in done.stderr.splitlines() if "segmentstore serve:" in line]
    assert len(lines) == 1 and "the container count cannot change" in lines[0], done.stderr
    assert "worker w0 started" not in done.stderr and "Traceback" not in done.stderr
