"""``segmentstore bench http``: the HTTP API against bare endpoints on the same server.

Three child processes serve on loopback, all on the server ``segmentstore serve`` uses
(:func:`segmentstore.api.server.server_config`: uvicorn, httptools, uvloop, one worker):

- ``store``: ``segmentstore serve`` over a fresh data directory;
- ``fastapi``: a FastAPI app with the same routes that takes each body and throws it away
  (reads answer a constant buffer): the same routes through FastAPI alone;
- ``asgi``: the same answers from one plain ASGI function: the server's own cost, the floor.

A load generator in a third party sends each the same requests in turn: ``wrk`` (Debian's
``apt-get install wrk``) with a generated Lua script, or without it a generator of this
module (a few processes of raw keep-alive HTTP/1.1; httpx would measure itself). Cases: 1 KiB
and 1 MiB appends over 16 segments, 1 MiB reads of cached data, ``:appendEvents`` of 100 and
of 1,000 events of 100 bytes. Per target and case: requests/s, p50/p99 latency, non-2xx
answers, and the server's CPU per request (every thread of its process, user and system,
from ``/proc``, over the measured seconds only). The appends are also run through the
embedded API (same sizes and concurrency) for HTTP/embedded; and the append-to-tail-read
latency is measured on the store alone (:mod:`segmentstore.bench.http_tail`).

Everything shares the machine, so the absolute figures say little; the ratios, each taken
within one round, are the figures. ``--rounds`` repeats the whole set with the order of the
targets rotated, and each figure reported is the median over the rounds (with its range);
the load average is printed with each round. The requests are the same in every run (seeded
payloads, a fixed order). Between cases the store is given time to move what it took to
Tier 2, so that its background work does not land on the next measurement.
"""

from __future__ import annotations

import logging
import os
import shutil
import statistics
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from segmentstore.bench.append import run_store
from segmentstore.bench.http_cases import SEGMENTS, Case, cases
from segmentstore.bench.http_load import Load, run_python, run_wrk
from segmentstore.bench.http_servers import (
    prepare_store,
    settle_disk,
    start_servers,
    store_process,
    wait_quiet,
)
from segmentstore.bench.http_tail import tail_latency_ms
from segmentstore.bench.report import print_table, run_loop, write_json
from segmentstore.harness.served_store import ServedStore

__all__ = ["choose_loadgen", "measure", "run", "store_process", "wait_quiet"]

TARGETS = ("store", "fastapi", "asgi")
TAIL_SAMPLES = 400
# What the HTTP path is meant to reach on a 2-core machine shared with the load generator:
# (case, figure, at least / at most, threshold). Judged on the medians of the rounds.
GOALS: list[tuple[str, str, str, float]] = [
    ("append-1k", "store_vs_fastapi", ">=", 2.0),
    ("append-1k", "store_vs_asgi", ">=", 0.8),
    ("append-1m", "http_vs_embedded", ">=", 0.9),
    ("events-1000", "store_events_per_s", ">=", 2_000_000),
    ("tail", "p50_ms", "<", 0.5),
]


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


def _measure_target(
    loadgen: str, server: ServedStore, case: Case, seconds: float, processes: int, base: Path
) -> dict[str, float]:
    warmup_s = min(1.0, seconds / 4)
    served = 1.0  # the requests the CPU was spent on, per request counted
    if loadgen == "wrk":
        run_wrk(server.url, case, warmup_s, base)  # warm-up, discarded
        cpu = server.cpu_s()
        load = run_wrk(server.url, case, seconds, base)
    else:
        # The generator's warm-up is part of its run: the CPU read around it covers both.
        cpu = server.cpu_s()
        load = run_python(server.url, case, seconds, processes, warmup_s)
        served = (seconds + warmup_s) / seconds
    cpu = server.cpu_s() - cpu
    per_s = load.requests / load.seconds if load.seconds else 0.0
    return {
        "req_per_s": per_s,
        "mb_per_s": per_s * case.payload_bytes / 1e6,
        "events_per_s": per_s * case.events,
        "p50_ms": load.p50_ms,
        "p99_ms": load.p99_ms,
        "failures": load.failures,
        "cpu_us_per_req": cpu / max(1.0, load.requests * served) * 1e6,
    }


def _embedded_mb_per_s(base: Path, case: Case, seconds: float) -> float:
    directory = base / f"embedded-{case.key}"
    directory.mkdir(exist_ok=True)
    try:
        result = run_loop(
            run_store(directory, case.payload_bytes, case.connections, SEGMENTS, seconds),
            "uvloop",
        )
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return float(result["appends_per_s"]) * case.payload_bytes / 1e6


def _round(
    number: int,
    rounds: int,
    servers: dict[str, ServedStore],
    chosen: list[Case],
    loadgen: str,
    seconds: float,
    processes: int,
    base: Path,
) -> dict[str, dict[str, float]]:
    """One measurement of every case on every target; ``{case: {figure: value}}``."""
    order = TARGETS[number % 3 :] + TARGETS[: number % 3]  # who goes first rotates
    print(f"... round {number + 1}/{rounds}, load average {_load()}, order {order}", flush=True)
    found: dict[str, dict[str, float]] = {}
    for case in chosen:
        row: dict[str, float] = {}
        for target in order:
            print(f"...   {case.title}: {target}, {case.connections} connections", flush=True)
            settle_disk()
            figures = _measure_target(loadgen, servers[target], case, seconds, processes, base)
            row.update({f"{target}_{key}": value for key, value in figures.items()})
            if target == "store":
                wait_quiet(servers["store"].url)
        row["store_vs_fastapi"] = row["store_req_per_s"] / max(row["fastapi_req_per_s"], 1e-9)
        row["store_vs_asgi"] = row["store_req_per_s"] / max(row["asgi_req_per_s"], 1e-9)
        if case.key.startswith("append-"):
            print(f"...   {case.title}: embedded API", flush=True)
            settle_disk()
            embedded = _embedded_mb_per_s(base, case, seconds)
            row["embedded_mb_per_s"] = embedded
            row["http_vs_embedded"] = row["store_mb_per_s"] / max(embedded, 1e-9)
        found[case.key] = row
    print("...   append-to-tail-read latency: store", flush=True)
    settle_disk()
    found["tail"] = tail_latency_ms(servers["store"].url, TAIL_SAMPLES)
    return found


def run(
    seconds: float,
    selected: Sequence[str] | None,
    loadgen: str,
    processes: int,
    directory: str | None,
    json_path: str | None,
    environ: Mapping[str, str],
    rounds: int = 3,
) -> list[dict[str, Any]]:
    """Runs the ``selected`` cases (default: all) ``rounds`` times; ``environ`` is what the
    servers start from (the command line hands in its environment)."""
    # The per-request log lines of the client that prepares the store would drown the table.
    # The embedded store's start-up lines (a store per append case and round) say nothing here.
    logging.getLogger("segmentstore").setLevel(logging.WARNING)
    loadgen = choose_loadgen(loadgen)
    table = cases()
    unknown = set(selected or ()) - set(table)
    if unknown:
        raise SystemExit(f"unknown cases {sorted(unknown)}; known: {sorted(table)}")
    chosen = [table[k] for k in (selected or table)]
    base = Path(tempfile.mkdtemp(prefix="bench-http-", dir=directory))
    print(
        f"... {rounds} round(s) of {len(chosen)} case(s) x {len(TARGETS)} servers"
        f" ({', '.join(TARGETS)}), {seconds:g} s each, load from {loadgen}",
        flush=True,
    )
    loads = [os.getloadavg()]
    servers = start_servers(base, environ)
    measured: list[dict[str, dict[str, float]]] = []
    try:
        prepare_store(servers["store"].url)
        for number in range(rounds):
            measured.append(
                _round(number, rounds, servers, chosen, loadgen, seconds, processes, base)
            )
            loads.append(os.getloadavg())
    finally:
        for server in servers.values():
            server.stop()
        shutil.rmtree(base, ignore_errors=True)
    rows = _medians(measured, chosen, loadgen)
    _judge(rows)
    _print(rows, loads)
    write_json(json_path, "http", [*rows, {"case": "load average", "samples": loads}])
    return rows


def _medians(
    measured: list[dict[str, dict[str, float]]], chosen: list[Case], loadgen: str
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for key in [c.key for c in chosen] + ["tail"]:
        runs = [found[key] for found in measured]
        row: dict[str, Any] = {"case": key, "rounds": len(runs), "loadgen": loadgen}
        case = next((c for c in chosen if c.key == key), None)
        if case is not None:
            row.update(
                title=case.title, connections=case.connections, payload_bytes=case.payload_bytes
            )
        for figure in runs[0]:
            values = [r[figure] for r in runs]
            row[figure] = statistics.median(values)
            row[f"{figure}_min"], row[f"{figure}_max"] = min(values), max(values)
        rows.append(row)
    return rows


def _judge(rows: list[dict[str, Any]]) -> None:
    """Adds ``goals``: each goal of :data:`GOALS` this run could judge, and whether it met it."""
    for row in rows:
        row["goals"] = []
        for case, figure, how, threshold in GOALS:
            if row["case"] == case and figure in row:
                value = row[figure]
                met = value >= threshold if how == ">=" else value < threshold
                row["goals"].append(
                    {"figure": figure, "goal": f"{how} {threshold:,g}", "value": value, "met": met}
                )


def _load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def _span(row: dict[str, Any], figure: str, spec: str) -> str:
    low, high = row.get(f"{figure}_min"), row.get(f"{figure}_max")
    text = format(row[figure], spec)
    if low is None or row["rounds"] < 2:
        return text
    return f"{text} ({format(low, spec)}-{format(high, spec)})"


def _print(rows: list[dict[str, Any]], loads: list[tuple[float, float, float]]) -> None:
    cases_ = [r for r in rows if r["case"] != "tail"]
    print("\nrequests/s, median of the rounds (range):")
    print_table(
        [
            {
                "case": r["case"],
                **{t: _span(r, f"{t}_req_per_s", ",.0f") for t in TARGETS},
                "store/fastapi": _span(r, "store_vs_fastapi", ".2f"),
                "store/asgi": _span(r, "store_vs_asgi", ".2f"),
            }
            for r in cases_
        ],
        [(k, k, "") for k in ("case", *TARGETS, "store/fastapi", "store/asgi")],
    )
    print("\nserver CPU per request, µs (user + system, all threads), and latency:")
    print_table(
        [
            {
                "case": r["case"],
                **{t: _span(r, f"{t}_cpu_us_per_req", ".1f") for t in TARGETS},
                "store p50/p99 ms": f"{r['store_p50_ms']:.2f}/{r['store_p99_ms']:.2f}",
                "failures": f"{r['store_failures']:.0f}/{r['fastapi_failures']:.0f}"
                f"/{r['asgi_failures']:.0f}",
            }
            for r in cases_
        ],
        [(k, k, "") for k in ("case", *TARGETS, "store p50/p99 ms", "failures")],
    )
    extra = [r for r in cases_ if "embedded_mb_per_s" in r or r["store_events_per_s"]]
    if extra:
        print("\nthroughput:")
        print_table(
            [
                {
                    "case": r["case"],
                    "store MB/s": _span(r, "store_mb_per_s", ",.1f"),
                    "embedded MB/s": _span(r, "embedded_mb_per_s", ",.1f")
                    if "embedded_mb_per_s" in r
                    else "",
                    "HTTP/embedded": _span(r, "http_vs_embedded", ".2f")
                    if "http_vs_embedded" in r
                    else "",
                    "store events/s": _span(r, "store_events_per_s", ",.0f")
                    if r["store_events_per_s"]
                    else "",
                }
                for r in extra
            ],
            [
                (k, k, "")
                for k in ("case", "store MB/s", "embedded MB/s", "HTTP/embedded", "store events/s")
            ],
        )
    tail = next(r for r in rows if r["case"] == "tail")
    print(
        f"\nappend-to-tail-read latency over HTTP ({TAIL_SAMPLES} per round): p50"
        f" {_span(tail, 'p50_ms', '.3f')} ms, p99 {_span(tail, 'p99_ms', '.3f')} ms"
    )
    print("\ngoals (on the medians):")
    for row in rows:
        for goal in row["goals"]:
            verdict = "met" if goal["met"] else "MISSED"
            print(
                f"  {row['case']:12} {goal['figure']:20} {goal['goal']:>12}:"
                f" {goal['value']:,.3g} {verdict}"
            )
    print(
        "load average (1, 5, 15 min) before and after each round: "
        + "; ".join(" ".join(f"{v:.2f}" for v in load) for load in loads)
    )
