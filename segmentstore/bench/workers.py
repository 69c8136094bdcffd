"""``segmentstore bench http --workers 1,2`` and ``bench client --workers 1,2``: the same load
against a node of one worker and of N, in one run.

One ``segmentstore serve --workers N`` child process per count, each over a fresh data
directory, all started first; each round loads every node in turn (the order rotated round by
round, so that neither always goes first on a machine whose load drifts), and each figure is
the median over the rounds of its ratio to the first count's figure in the same round.

- ``http``: a plain HTTP load that knows nothing of workers: ``wrk`` (else the in-project
  generator) sending 1 KiB ``:append`` requests over 64 connections to 16 segments through
  the node's port, each request of a connection to the next segment, so that about half of
  them are for a container another worker owns and the connection moves (docs/architecture.md).
- ``client``: the routing client, which reads the node's map and sends each request to the
  owning worker's own address: 64 tasks appending 1 KiB over 16 segments, and an
  :class:`~segmentstore.client.EventWriter` ``send()``-ing 1 KiB records from 256 producers.

Per load and node: requests (or records) per second, the server's CPU per request (every
process and thread of the node, user and system, over the measured seconds only) and the
ratio of each to the one-worker node's. The client runs in this process and the load
generator beside it: all share the machine's cores with the node, as they would on one host.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import statistics
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from segmentstore.bench.client import append_segments, appends, create_segments, writer_records
from segmentstore.bench.http import choose_loadgen
from segmentstore.bench.http_cases import KiB, cases
from segmentstore.bench.http_load import run_python, run_wrk
from segmentstore.bench.http_servers import STARTUP_TIMEOUT_S, settle_disk, wait_quiet
from segmentstore.bench.report import print_table, run_loop, write_json
from segmentstore.harness.served_store import ServedStore

CONNECTIONS = 64
# What a node of two workers is meant to reach against one on a 2-core machine shared with
# its load: (load, figure, at least / at most, threshold), judged on the medians.
GOALS: list[tuple[str, str, str, float]] = [
    ("http-append-1k", "per_s_ratio", ">=", 1.2),
    ("client-append-1k", "per_s_ratio", ">=", 1.4),
    ("client-append-1k", "cpu_ratio", "<=", 1.15),
    ("writer-send-1k", "per_s_ratio", ">=", 1.3),
]

Measure = Callable[[ServedStore, float, Path], dict[str, float]]


def _http_append(loadgen: str, processes: int) -> Measure:
    case = dataclasses.replace(cases()["append-1k"], connections=CONNECTIONS)

    def measure(node: ServedStore, seconds: float, base: Path) -> dict[str, float]:
        warmup_s = min(1.0, seconds / 4)
        if loadgen == "wrk":
            run_wrk(node.url, case, warmup_s, base)  # warm-up, discarded
            cpu = node.cpu_s()
            load = run_wrk(node.url, case, seconds, base)
            requests = load.requests
        else:
            cpu = node.cpu_s()
            load = run_python(node.url, case, seconds, processes, warmup_s)
            requests = round(load.requests * (seconds + warmup_s) / seconds)
        cpu = node.cpu_s() - cpu
        return {
            "per_s": load.requests / load.seconds,
            "cpu_us": cpu / max(1, requests) * 1e6,
            "p50_ms": load.p50_ms,
            "p99_ms": load.p99_ms,
            "failures": load.failures,
        }

    return measure


def _client_append(loop: str) -> Measure:
    def measure(node: ServedStore, seconds: float, base: Path) -> dict[str, float]:
        figures = run_loop(appends(node.url, seconds, "client", node.cpu_s), loop)
        return {"per_s": figures["per_s"], "cpu_us": figures["server_cpu_us_per_record"]}

    return measure


def _writer_send(loop: str) -> Measure:
    def measure(node: ServedStore, seconds: float, base: Path) -> dict[str, float]:
        figures = run_loop(writer_records(node.url, KiB, seconds, 4, node.cpu_s), loop)
        return {
            "per_s": figures["records_per_s"],
            "cpu_us": figures["server_cpu_us_per_record"],
        }

    return measure


def _loads(kind: str, loadgen: str, processes: int, loop: str) -> dict[str, tuple[str, Measure]]:
    """load key -> (its title, how it is measured)."""
    if kind == "http":
        title = f"{loadgen} 1 KiB appends, {CONNECTIONS} connections, 16 segments, node port"
        return {"http-append-1k": (title, _http_append(loadgen, processes))}
    return {
        "client-append-1k": (
            f"routing client: 1 KiB appends, {CONNECTIONS} tasks, 16 segments",
            _client_append(loop),
        ),
        "writer-send-1k": (
            "routing EventWriter: send() 1 KiB records, 256 producers, 16 segments",
            _writer_send(loop),
        ),
    }


def _start(counts: Sequence[int], base: Path, environ: Mapping[str, str]) -> dict[int, ServedStore]:
    nodes: dict[int, ServedStore] = {}
    try:
        for count in counts:
            directory = base / f"workers-{count}"
            directory.mkdir()
            nodes[count] = ServedStore(
                directory / "data", directory / "node.log", environ=environ, workers=count
            )
        for node in nodes.values():
            node.wait_ready(STARTUP_TIMEOUT_S)
            run_loop(create_segments(node.url, append_segments()), "asyncio")
    except BaseException:
        for node in nodes.values():
            node.stop()
        raise
    return nodes


def run(
    kind: str,
    counts: Sequence[int],
    seconds: float,
    rounds: int,
    loadgen: str,
    processes: int,
    loop: str,
    directory: str | None,
    json_path: str | None,
    environ: Mapping[str, str],
) -> list[dict[str, Any]]:
    """``kind``: ``http`` (a plain load generator) or ``client`` (the routing client and the
    EventWriter), against a node of each of ``counts`` workers, ``rounds`` times."""
    if len(counts) < 2 or counts[0] != 1:
        raise SystemExit("--workers: 1 first, then the counts to compare with it, e.g. 1,2")
    loadgen = choose_loadgen(loadgen) if kind == "http" else loadgen
    loads = _loads(kind, loadgen, processes, loop)
    base = Path(tempfile.mkdtemp(prefix=f"bench-workers-{kind}-", dir=directory))
    averages = [os.getloadavg()]
    print(
        f"... {rounds} round(s): {len(loads)} load(s) x nodes of {counts} workers,"
        f" {seconds:g} s each",
        flush=True,
    )
    measured: list[dict[str, dict[int, dict[str, float]]]] = []
    nodes = _start(counts, base, environ)
    try:
        for number in range(rounds):
            order = list(counts[number % len(counts) :]) + list(counts[: number % len(counts)])
            print(f"... round {number + 1}/{rounds}, load average {_load()}, order {order}")
            found: dict[str, dict[int, dict[str, float]]] = {key: {} for key in loads}
            for key, (title, measure) in loads.items():
                for count in order:
                    print(f"...   {title}: {count} worker(s)", flush=True)
                    settle_disk()
                    found[key][count] = measure(nodes[count], seconds, base)
                    wait_quiet(nodes[count].url)
            measured.append(found)
            averages.append(os.getloadavg())
    finally:
        for node in nodes.values():
            node.stop()
        shutil.rmtree(base, ignore_errors=True)
    rows = _rows(measured, loads, counts)
    _print(rows, averages)
    write_json(
        json_path, f"{kind} --workers", [*rows, {"case": "load average", "samples": averages}]
    )
    return rows


def _rows(
    measured: list[dict[str, dict[int, dict[str, float]]]],
    loads: dict[str, tuple[str, Measure]],
    counts: Sequence[int],
) -> list[dict[str, Any]]:
    """One row per load and count, with the medians over the rounds and, for N > 1, the
    median of the same-round ratios to one worker."""
    rows = []
    for key, (title, _) in loads.items():
        for count in counts:
            runs = [found[key][count] for found in measured]
            row: dict[str, Any] = {"case": key, "title": title, "workers": count}
            for figure in runs[0]:
                row[figure] = statistics.median(r[figure] for r in runs)
            if count != counts[0]:
                for figure, ratio in (("per_s", "per_s_ratio"), ("cpu_us", "cpu_ratio")):
                    ratios = [
                        found[key][count][figure] / max(found[key][counts[0]][figure], 1e-9)
                        for found in measured
                    ]
                    row[ratio] = statistics.median(ratios)
                    row[f"{ratio}_min"], row[f"{ratio}_max"] = min(ratios), max(ratios)
            row["goals"] = _goals(row)
            rows.append(row)
    return rows


def _goals(row: dict[str, Any]) -> list[dict[str, Any]]:
    judged = []
    for case, figure, how, threshold in GOALS:
        if row["case"] == case and figure in row and row["workers"] == 2:
            value = row[figure]
            met = value >= threshold if how == ">=" else value <= threshold
            judged.append({"figure": figure, "goal": f"{how} {threshold:g}", "value": value,
                           "met": met})  # fmt: skip
    return judged


def _span(row: dict[str, Any], figure: str) -> str:
    if figure not in row:
        return ""
    low, high = row.get(f"{figure}_min"), row.get(f"{figure}_max")
    return f"{row[figure]:.2f} ({low:.2f}-{high:.2f})" if low is not None else f"{row[figure]:.2f}"


def _load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def _print(rows: list[dict[str, Any]], averages: list[tuple[float, float, float]]) -> None:
    print("\nmedians of the rounds; ratios to 1 worker taken within each round (range):")
    print_table(
        [
            {
                "case": r["case"],
                "workers": str(r["workers"]),
                "per_s": f"{r['per_s']:,.0f}",
                "cpu_us": f"{r['cpu_us']:.1f}",
                "per_s ratio": _span(r, "per_s_ratio"),
                "cpu ratio": _span(r, "cpu_ratio"),
            }
            for r in rows
        ],
        [
            ("case", "case", ""),
            ("workers", "workers", ""),
            ("per_s", "req/s", ""),
            ("cpu_us", "server CPU µs/req", ""),
            ("per_s ratio", "req/s vs 1", ""),
            ("cpu ratio", "CPU/req vs 1", ""),
        ],
    )
    print("\ngoals (2 workers against 1, on the medians):")
    for row in rows:
        for goal in row["goals"]:
            verdict = "met" if goal["met"] else "MISSED"
            print(f"  {row['case']:18} {goal['figure']:12} {goal['goal']:>8}: "
                  f"{goal['value']:.2f} {verdict}")  # fmt: skip
    print(
        "load average (1, 5, 15 min) before and after each round: "
        + "; ".join(" ".join(f"{v:.2f}" for v in load) for load in averages)
    )
