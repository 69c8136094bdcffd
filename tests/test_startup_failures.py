"""Every way ``segmentstore serve`` can fail to start is one line on standard error that names
the cause and the fix, exit status 2 for usage and settings and 1 for the rest, and no
traceback unless the log level is ``debug``. The port is bound before the data directory is
touched, and a data directory held by a running node is refused at once."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from store_checks import flush

from segmentstore import SegmentStore
from segmentstore.drill.small_disk import SmallDisk, SmallDiskUnavailable
from segmentstore.harness.served_store import REPO, ServedStore
from segmentstore.loopback import free_port

TIMEOUT_S = 60


@dataclass
class Refusal:
    exit_code: int
    stderr: str
    seconds: float

    @property
    def lines(self) -> list[str]:
        return self.stderr.splitlines()


def serve(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout_s: float = TIMEOUT_S
) -> Refusal:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("SEGMENTSTORE_")}
    environment["PYTHONPATH"] = str(REPO)
    environment.update(env or {})
    command = [sys.executable, "-m", "segmentstore.cli", "serve", "--host", "127.0.0.1", *args]
    started = time.monotonic()
    done = subprocess.run(
        command, cwd=cwd, env=environment, capture_output=True, text=True, timeout=timeout_s
    )
    return Refusal(done.returncode, done.stderr, time.monotonic() - started)


def port() -> str:
    return str(free_port())


@pytest.fixture
def read_only_dir(tmp_path: Path) -> Iterator[Path]:
    disk = SmallDisk(tmp_path / "ro", 1 << 20)
    try:
        disk.mount()
    except SmallDiskUnavailable as reason:
        pytest.skip(str(reason))
    try:
        disk.set_read_only(True)
        yield disk.path
    finally:
        disk.unmount()


def a_file(tmp_path: Path) -> list[str]:
    (tmp_path / "data").write_text("not a directory\n")
    return ["--data-dir", "data"]


def foreign_identity(tmp_path: Path) -> list[str]:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "store.json").write_text('{"name": "another program"}')
    return ["--data-dir", "data"]


def damaged_identity(tmp_path: Path) -> list[str]:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "store.json").write_bytes(bytes(range(256)))
    return ["--data-dir", "data"]


def tier1_lost(tmp_path: Path) -> list[str]:
    async def write_then_lose_tier1() -> None:
        async with SegmentStore.open(tmp_path / "data", containers=4) as store:
            await store.create_segment("kept/in/tier2")
            await store.append("kept/in/tier2", b"hello")
            await flush(store)
        (tmp_path / "data" / "store.json").unlink()
        for path in sorted((tmp_path / "data" / "tier1").rglob("*"), reverse=True):
            path.rmdir() if path.is_dir() else path.unlink()

    asyncio.run(write_then_lose_tier1())
    return ["--data-dir", "data"]


# name -> (how to set it up in an empty directory: the flags, exit status, words the line
# must hold)
CASES: dict[str, tuple[Callable[[Path], list[str]], int, list[str]]] = {
    "a setting out of range": (
        lambda _: ["--containers", "0"], 2, ["store.containers", "fix the flag"]
    ),
    "a flag that is not a number": (
        lambda _: ["--port", "ninety"], 2, ["--port", "--help lists the flags"]
    ),
    "a Tier 2 URI no backend takes": (
        lambda _: ["--tier2", "ftp://x/y"], 2, ["tier2.uri", "unknown scheme 'ftp'"]
    ),
    "a data directory that is a file": (
        a_file, 1, ["data is not a directory", "give --data-dir"]
    ),
    "a foreign store.json": (
        foreign_identity, 1, ["store.json is not a segment store's", "give --data-dir"]
    ),
    "a damaged store.json": (
        damaged_identity, 1, ["store.json is damaged", "restore it from a backup"]
    ),
    "Tier 1 lost over a Tier 2 with segments": (
        tier1_lost, 1, ["has no Tier 1", "--rebuild-from-tier2"]
    ),
}  # fmt: skip


@pytest.mark.parametrize("workers", ["1", "2"])
@pytest.mark.parametrize("case", list(CASES))
def test_a_startup_failure_is_one_line_with_its_exit_status(
    tmp_path: Path, case: str, workers: str
) -> None:
    """The same for one process and for a node of two workers (its supervisor binds, locks and
    has the data directory claimed before any worker starts)."""
    setup, exit_code, words = CASES[case]
    flags = setup(tmp_path)
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    refused = serve("--port", port(), "--workers", workers, *flags, cwd=tmp_path)
    print(f"{case} ({workers} workers): exit {refused.exit_code}: {refused.stderr.strip()}")
    assert refused.exit_code == exit_code, refused.stderr
    assert len(refused.lines) == 1, refused.stderr
    assert refused.lines[0].startswith("segmentstore serve: ")
    for word in words:
        assert word in refused.lines[0], refused.lines[0]
    if exit_code == 2 or "store.json" in case:
        # Refused before anything was made or changed.
        assert sorted(str(p) for p in tmp_path.rglob("*")) == before


def test_a_read_only_data_directory(tmp_path: Path, read_only_dir: Path) -> None:
    refused = serve("--port", port(), "--data-dir", str(read_only_dir), cwd=tmp_path)
    print(f"a read-only data directory: exit {refused.exit_code}: {refused.stderr.strip()}")
    assert refused.exit_code == 1
    assert refused.lines == [
        f"segmentstore serve: cannot use the data directory {read_only_dir}: it is on a"
        " read-only file system: give --data-dir (store.data_dir) a directory this process"
        " can write"
    ]


def test_debug_shows_the_traceback_before_the_line(tmp_path: Path) -> None:
    flags = foreign_identity(tmp_path)
    refused = serve("--port", port(), *flags, "--log-level", "debug", cwd=tmp_path)
    assert refused.exit_code == 1
    assert "Traceback (most recent call last)" in refused.stderr
    assert refused.lines[-1].startswith("segmentstore serve: ")
    assert "store.json is not a segment store's" in refused.lines[-1]


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_port_in_use_is_refused_before_the_data_directory_is_touched(
    tmp_path: Path, workers: str
) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        number = taken.getsockname()[1]
        flags = ["--data-dir", "data", "--workers", workers]
        refused = serve("--port", str(number), *flags, cwd=tmp_path)
    print(f"a port in use: exit {refused.exit_code}: {refused.stderr.strip()}")
    assert refused.exit_code == 1
    assert refused.lines == [
        f"segmentstore serve: cannot listen on 127.0.0.1:{number}: another process listens on"
        " that port: stop it, or choose another port with --port (api.port)"
    ]
    assert not (tmp_path / "data").exists(), "the data directory was made"


def test_jetstream_out_of_reach_is_given_up_after_the_startup_wait(tmp_path: Path) -> None:
    nowhere = f"nats://127.0.0.1:{free_port()}"  # nothing listens there
    flags = ["--data-dir", "data", "--tier1", "jetstream", "--nats", nowhere]
    wait = {"SEGMENTSTORE_STORE__STARTUP_WAIT_MS": "3000"}
    refused = serve("--port", port(), *flags, cwd=tmp_path, env=wait)
    print(
        f"JetStream out of reach: exit {refused.exit_code} after {refused.seconds:.0f} s:"
        f" {refused.stderr.strip()}"
    )
    assert refused.exit_code == 1
    assert refused.lines == [
        f"segmentstore serve: cannot reach JetStream within 3 s: no JetStream server answered"
        f" at {nowhere}: check that the JetStream servers run and that"
        " tier1.jetstream.servers (--nats) and the credentials name them"
    ]
    assert 3 <= refused.seconds < TIMEOUT_S


@pytest.mark.parametrize(("first_workers", "second_workers"), [(1, "1"), (2, "1"), (1, "2")])
def test_a_data_directory_held_by_a_running_node_is_refused_at_once(
    tmp_path: Path, first_workers: int, second_workers: str
) -> None:
    """A node of several workers holds the lock in its supervisor (the pid named), and refuses
    a second node as one process does."""
    first = ServedStore(
        tmp_path / "data", tmp_path / "first.log", environ=os.environ, workers=first_workers
    )
    try:
        first.wait_ready(TIMEOUT_S)
        identity = (tmp_path / "data" / "store.json").read_text()
        flags = ["--data-dir", "data", "--workers", second_workers]
        refused = serve("--port", port(), *flags, cwd=tmp_path)
        print(
            f"a data directory in use: exit {refused.exit_code} after {refused.seconds:.1f} s:"
            f" {refused.stderr.strip()}"
        )
        assert refused.exit_code == 1
        assert refused.lines == [
            f"segmentstore serve: the data directory data is in use by another process (pid"
            f" {first.proc.pid}): stop it, or give this one another --data-dir"
            " (store.data_dir); two stores must never share one"
        ]
        assert refused.seconds < 20  # the start of a Python process, not a retry loop
        assert (tmp_path / "data" / "store.json").read_text() == identity
        assert json.loads(identity)["containers"] == 4
    finally:
        assert first.stop() == 0 or first.proc.returncode is not None
    # Once the first has stopped (every process of it), the directory is free again.
    second = ServedStore(
        tmp_path / "data", tmp_path / "second.log", environ=os.environ, workers=first_workers
    )
    try:
        second.wait_ready(TIMEOUT_S)
    finally:
        second.stop()
