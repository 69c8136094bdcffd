"""The servers of ``segmentstore bench http`` and ``bench client``: child processes on loopback
(:class:`~segmentstore.harness.served_store.ServedStore`).

Each serves on port 0 and is found by its log line; each is built by
:func:`segmentstore.api.server.server_config` (uvicorn with httptools and uvloop, access log
off, one worker), as ``segmentstore serve`` is; :meth:`ServedStore.cpu_s` reads the CPU time
a child (all its threads) has used so far, from ``/proc``.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import httpx

from segmentstore.bench.http_cases import READ_SEGMENT_MIB, SEGMENTS, TAIL_SEGMENT, MiB, payload
from segmentstore.client import SegmentStoreClient
from segmentstore.harness.served_store import REPO, ServedStore, child_environment

STARTUP_TIMEOUT_S = 60.0
QUIET_TIMEOUT_S = 60.0

# -- the servers ----------------------------------------------------------------------------


def store_process(base: Path, environ: Mapping[str, str]) -> ServedStore:
    """``segmentstore serve`` with its defaults over ``base/data``, on a loopback port (not yet
    ready: call ``wait_ready``)."""
    return ServedStore(base / "data", base / "store.log", environ=environ)


def start_servers(base: Path, environ: Mapping[str, str]) -> dict[str, ServedStore]:
    """The store and the two bare baselines (``fastapi``, ``asgi``), ready."""
    servers = {"store": store_process(base, environ)}
    for kind in ("fastapi", "asgi"):
        argv = [sys.executable, "-m", "segmentstore.api.baselines", kind]
        env = child_environment(environ)
        servers[kind] = ServedStore.launch(argv, env, REPO, base / f"{kind}.log")
    try:
        for server in servers.values():
            server.wait_ready(STARTUP_TIMEOUT_S)
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
