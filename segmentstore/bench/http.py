"""``segmentstore bench http``: the HTTP API against a bare FastAPI endpoint on the same server.

Two child processes serve on loopback: ``segmentstore serve`` over a fresh data directory,
and a *bare* FastAPI app with the same routes that accepts each body and throws it away (reads
answer a constant buffer). Both are built by ``api.server.server_config`` and run on uvloop
the way ``segmentstore serve`` runs, so they share every uvicorn setting (httptools, access
log off, one worker); the difference between them is the store. A third party loads them in
turn with the same requests:

- ``wrk`` (``apt-get install wrk``) with a generated Lua script, if it is on the ``PATH``;
- otherwise a load generator of this module: a few processes, each keeping its share of the
  connections busy with raw keep-alive HTTP/1.1 over asyncio sockets (uvloop if present).
  (httpx is far too slow to load a server: it would measure itself.)

Cases: 1 KiB and 1 MiB appends, 1 MiB reads (of data the store has cached) and
``:appendEvents`` of 100 and of 1000 events of 100 bytes. Reported per target: requests/s, MB/s of
payload, p50/p99 latency, non-2xx answers; and the ratio store / bare of requests per second.
Both targets share the machine with the load generator (two cores here), so the absolutes say
little; the ratio, taken in one run on one machine, is the figure. Between cases the store is
given time to move what it has taken to Tier 2, so that its background work does not land on
the next measurement.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import httpx

from segmentstore.bench.append import run_store
from segmentstore.bench.http_cases import READ_SEGMENT_MIB, SEGMENTS, Case, MiB, cases
from segmentstore.bench.http_load import Load, run_python, run_wrk
from segmentstore.bench.report import print_table, run_loop, write_json
from segmentstore.client import SegmentStoreClient

REPO = Path(__file__).resolve().parents[2]
STARTUP_TIMEOUT_S = 60.0
QUIET_TIMEOUT_S = 60.0
_RUNNING_ON = re.compile(r"Uvicorn running on http://127\.0\.0\.1:(\d+)")

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


def _start_servers(base: Path, environ: Mapping[str, str]) -> tuple[ServerProcess, ServerProcess]:
    store = store_process(base, environ)
    # The baseline is a program of its own in api/ (the core never imports FastAPI).
    bare = ServerProcess(
        "bare",
        [sys.executable, "-m", "segmentstore.api.bench_baseline"],
        base / "bare.log",
        environ,
    )
    try:
        store.wait_ready()
        bare.wait_ready()
    except BaseException:
        store.stop()
        bare.stop()
        raise
    return store, bare


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


def _prepare_store(url: str) -> None:
    """The segments the cases append to, and one of READ_SEGMENT_MIB MiB to read from."""
    with SegmentStoreClient(url) as client:
        for i in range(SEGMENTS):
            client.create_segment(f"bench/http-{i:02d}")
        client.create_segment("bench/read")
        block = os.urandom(MiB)
        for _ in range(READ_SEGMENT_MIB):
            client.append("bench/read", block)


# -- the run --------------------------------------------------------------------------------


def measure(
    loadgen: str, url: str, case: Case, seconds: float, processes: int, workdir: Path
) -> Load:
    warmup_s = min(1.0, seconds / 4)
    if loadgen == "wrk":
        run_wrk(url, case, warmup_s, workdir)  # warm-up, discarded
        return run_wrk(url, case, seconds, workdir)
    return run_python(url, case, seconds, processes, warmup_s)


def choose_loadgen(loadgen: str) -> str:
    """``auto``: wrk if it is on the PATH, else the in-project generator."""
    if loadgen == "auto":
        return "wrk" if shutil.which("wrk") else "python"
    if loadgen == "wrk" and not shutil.which("wrk"):
        raise SystemExit("wrk is not installed (Debian: apt-get install wrk); try --loadgen python")
    return loadgen


def _figures(prefix: str, case: Case, load: Load) -> dict[str, Any]:
    per_s = load.requests / load.seconds if load.seconds else 0.0
    return {
        f"{prefix}_req_per_s": per_s,
        f"{prefix}_mb_per_s": per_s * case.payload_bytes / 1e6,
        f"{prefix}_events_per_s": per_s * case.events,
        f"{prefix}_p50_ms": load.p50_ms,
        f"{prefix}_p99_ms": load.p99_ms,
        f"{prefix}_failures": load.failures,
    }


def run(
    seconds: float,
    selected: Sequence[str] | None,
    loadgen: str,
    processes: int,
    directory: str | None,
    json_path: str | None,
    environ: Mapping[str, str],
) -> list[dict[str, Any]]:
    """Runs the ``selected`` cases (default: all); ``environ`` is what the servers start
    from (the command line hands in its environment)."""
    # The per-request log lines of the client that prepares the store would drown the table.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    loadgen = choose_loadgen(loadgen)
    table = cases()
    unknown = set(selected or ()) - set(table)
    if unknown:
        raise SystemExit(f"unknown cases {sorted(unknown)}; known: {sorted(table)}")
    chosen = [table[k] for k in (selected or table)]
    base = Path(tempfile.mkdtemp(prefix="bench-http-", dir=directory))
    rows: list[dict[str, Any]] = []
    print(f"... starting the store and the bare endpoint (load: {loadgen})", flush=True)
    store, bare = _start_servers(base, environ)
    try:
        _prepare_store(store.url)
        for number, case in enumerate(chosen, 1):
            loads = {}
            for label, server in (("store", store), ("bare", bare)):
                print(
                    f"... [{number}/{len(chosen)}] {case.title}: {label},"
                    f" {case.connections} connections, {seconds:g} s",
                    flush=True,
                )
                loads[label] = measure(loadgen, server.url, case, seconds, processes, base)
                if label == "store":
                    wait_quiet(store.url)
            row: dict[str, Any] = {
                "case": case.key,
                "title": case.title,
                "connections": case.connections,
                "payload_bytes": case.payload_bytes,
                "loadgen": loadgen,
                **_figures("store", case, loads["store"]),
                **_figures("bare", case, loads["bare"]),
            }
            bare_rate = row["bare_req_per_s"]
            row["ratio"] = row["store_req_per_s"] / bare_rate if bare_rate else float("nan")
            if case.key.startswith("append-"):
                # The same appends through the embedded API, same size and concurrency.
                print(f"... [{number}/{len(chosen)}] {case.title}: embedded API", flush=True)
                embedded = _embedded_mb_per_s(base, case, seconds)
                row["embedded_mb_per_s"] = embedded
                row["http_vs_embedded"] = row["store_mb_per_s"] / embedded
            rows.append(row)
            if row["store_failures"] or row["bare_failures"]:
                print(
                    f"!!! {case.title}: {row['store_failures']} store and"
                    f" {row['bare_failures']} bare answers were not 2xx or broke",
                    flush=True,
                )
    finally:
        store.stop()
        bare.stop()
        shutil.rmtree(base, ignore_errors=True)
    _print(rows)
    write_json(json_path, "http", rows)
    return rows


def _embedded_mb_per_s(base: Path, case: Case, seconds: float) -> float:
    directory = base / f"embedded-{case.key}"
    directory.mkdir()
    try:
        result = run_loop(
            run_store(directory, case.payload_bytes, case.connections, SEGMENTS, seconds),
            "uvloop",
        )
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return float(result["appends_per_s"]) * case.payload_bytes / 1e6


def _print(rows: list[dict[str, Any]]) -> None:
    print_table(
        rows,
        [
            ("case", "case", ""),
            ("store_req_per_s", "store req/s", ",.0f"),
            ("store_mb_per_s", "store MB/s", ",.1f"),
            ("store_p50_ms", "p50 ms", ".2f"),
            ("store_p99_ms", "p99 ms", ".2f"),
            ("bare_req_per_s", "bare req/s", ",.0f"),
            ("bare_mb_per_s", "bare MB/s", ",.1f"),
            ("bare_p50_ms", "p50 ms", ".2f"),
            ("bare_p99_ms", "p99 ms", ".2f"),
            ("ratio", "store/bare", ".2f"),
        ],
    )
    appends = [r for r in rows if "embedded_mb_per_s" in r]
    if appends:
        print()
        print_table(
            appends,
            [
                ("case", "case", ""),
                ("store_mb_per_s", "HTTP MB/s", ",.1f"),
                ("embedded_mb_per_s", "embedded MB/s", ",.1f"),
                ("http_vs_embedded", "HTTP/embedded", ".2f"),
            ],
        )
    events = [r for r in rows if r["store_events_per_s"]]
    if events:
        print()
        print_table(
            events,
            [
                ("case", "case", ""),
                ("store_events_per_s", "store ev/s", ",.0f"),
                ("bare_events_per_s", "bare ev/s", ",.0f"),
                ("ratio", "store/bare", ".2f"),
            ],
        )
