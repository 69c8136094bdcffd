"""``segmentstore bench client``: the Python client against ``wrk`` on the same server.

One ``segmentstore serve`` child process on loopback, loaded in turn by:

1. ``wrk`` (or, without it, the in-project generator of ``bench http``): plain 1 KiB
   ``:append`` requests over 64 connections and 16 segments, the server's ceiling for
   one-record requests. Every other figure is a ratio to this one.
2. :class:`~segmentstore.client.AsyncSegmentStoreClient` (its own HTTP/1.1 transport), 64
   tasks doing the same appends; the same requests from a bare aiohttp session (a
   general-purpose asyncio client, for scale); and the client over httpx's asyncio pool.
3. :class:`~segmentstore.client.EventWriter`: 256 producer tasks over 16 segments (16 per
   segment), each sending without waiting (up to ``WINDOW`` unanswered); acknowledged records/s
   and MB/s for 1 KiB and 100 B records. The CPU this process spent per record is measured,
   and how much of it is the writer's buffering alone (``send`` with nothing sent). Then the
   same 256 tasks each awaiting ``write`` (one record at a time per task, as code that needs
   each offset before going on writes), with up to ``max_in_flight`` batches per segment
   (the default) and with one (``max_in_flight=1``, as before batches were chained).
4. The append-to-read latency: one producer writes a record every 2 ms through an
   ``EventWriter`` while an ``EventReader`` follows the tail.

The client runs in this process, the server in its child: both share the machine's cores,
as a producer and a store on one host do, so the less CPU the client spends per request the
more the store keeps. The machine's load average is printed before and after: on a machine
that others use the figures mean little without it. Each row that has a target says whether
this run met it (:data:`TARGETS`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shutil
import tempfile
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import httpx

from segmentstore.bench.http import choose_loadgen, measure, store_process, wait_quiet
from segmentstore.bench.http_cases import SEGMENTS, KiB, cases
from segmentstore.bench.http_servers import STARTUP_TIMEOUT_S
from segmentstore.bench.report import percentile, print_table, run_loop, write_json
from segmentstore.client import AsyncSegmentStoreClient, EventAck, EventReader, EventWriter
from segmentstore.contracts.errors import SegmentExistsError

APPEND_TASKS = 64
PRODUCERS = 256
WINDOW = 1024  # records a producer has sent and not yet seen answered, at most
LATENCY_INTERVAL_S = 0.002

# What the client is meant to reach on a 2-core machine shared with the server: a ratio to
# the baseline for one-record requests, records/s for the EventWriter.
TARGETS: dict[str, tuple[str, float]] = {
    f"client append 1 KiB x{APPEND_TASKS}": ("vs_baseline", 0.8),
    f"EventWriter send() 1024 B x{PRODUCERS}": ("per_s", 150_000),
    f"EventWriter send() 100 B x{PRODUCERS}": ("per_s", 200_000),
    f"EventWriter write() 1024 B x{PRODUCERS}": ("per_s", 150_000),
}


def append_segments() -> list[str]:
    return [f"bench/http-{i:02d}" for i in range(SEGMENTS)]


async def create_segments(url: str, names: list[str], exist_ok: bool = False) -> None:
    """``exist_ok``: a segment an earlier round made is used again."""
    async with AsyncSegmentStoreClient(url) as client:
        for name in names:
            try:
                await client.create_segment(name)
            except SegmentExistsError:
                if not exist_ok:
                    raise


class _BareAiohttp:
    """A bare aiohttp session posting the same requests: the transport's own floor."""

    def __init__(self, url: str) -> None:
        import aiohttp

        self._url = url
        self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=100))

    async def append(self, segment: str, body: bytes) -> None:
        async with self._session.post(
            f"{self._url}/v1/segments/{segment}:append",
            data=body,
            headers={"Content-Type": "application/octet-stream"},
        ) as response:
            await response.read()
            response.raise_for_status()

    async def aclose(self) -> None:
        await self._session.close()


async def appends(
    url: str, seconds: float, how: str, server_cpu_s: Callable[[], float] | None = None
) -> dict[str, float]:
    """Appends/s of ``APPEND_TASKS`` tasks each appending 1 KiB in a loop, and this process's
    CPU per append; ``how``: ``client`` (aiohttp), ``httpx`` (httpx's asyncio pool under
    the same client) or ``aiohttp`` (a bare session, no client around it). With
    ``server_cpu_s`` (the server's CPU seconds so far), also the server's CPU per append."""
    transport = httpx.AsyncHTTPTransport() if how == "httpx" else None
    body = os.urandom(KiB)
    segments = append_segments()
    done = 0
    async with AsyncSegmentStoreClient(url, transport=transport) as client:
        bare = _BareAiohttp(url) if how == "aiohttp" else None
        append: Callable[[str, bytes], Awaitable[Any]] = bare.append if bare else client.append

        async def task(index: int, until: float, count: bool) -> None:
            nonlocal done
            segment = segments[index % len(segments)]
            while time.perf_counter() < until:
                await append(segment, body)
                done += count

        try:
            warm = time.perf_counter() + min(1.0, seconds / 4)
            await asyncio.gather(*(task(i, warm, False) for i in range(APPEND_TASKS)))
            server = server_cpu_s() if server_cpu_s else 0.0
            cpu, begun = time.process_time(), time.perf_counter()
            await asyncio.gather(*(task(i, begun + seconds, True) for i in range(APPEND_TASKS)))
            elapsed, cpu = time.perf_counter() - begun, time.process_time() - cpu
            server = server_cpu_s() - server if server_cpu_s else 0.0
        finally:
            if bare is not None:
                await bare.aclose()
    figures = {"per_s": done / elapsed, "client_cpu_us_per_record": cpu / max(1, done) * 1e6}
    if server_cpu_s is not None:
        figures["server_cpu_us_per_record"] = server / max(1, done) * 1e6
    return figures


async def writer_records(
    url: str,
    payload_bytes: int,
    seconds: float,
    max_in_flight: int = 4,
    server_cpu_s: Callable[[], float] | None = None,
) -> dict[str, float]:
    """Acknowledged records/s through one EventWriter, and this process's CPU per record
    (with ``server_cpu_s``, the server's too).

    The clock stops once every record sent is answered, so each counted record is
    acknowledged (durable in the store with its offset) within the measured time.
    """
    segments = [f"bench/events-{payload_bytes}-{max_in_flight}-{i:02d}" for i in range(SEGMENTS)]
    await create_segments(url, segments, exist_ok=True)  # a later round of the same server
    payload = os.urandom(payload_bytes)
    acknowledged = 0
    async with (
        AsyncSegmentStoreClient(url) as client,
        EventWriter(
            client, linger_ms=2, batch_bytes=1 << 20, max_in_flight=max_in_flight
        ) as writer,
    ):

        async def producer(index: int, until: float) -> int:
            # Driven as a Kafka producer is: send without waiting for each answer; the
            # writer's memory bound (back-pressure in send) and a window of acks bound it.
            segment = segments[index % len(segments)]
            acks: deque[EventAck] = deque()
            clock = time.perf_counter
            sent = 0
            while clock() < until:
                acks.append(await writer.send(segment, payload))
                sent += 1
                if len(acks) >= WINDOW:
                    await acks.popleft()
            for ack in acks:
                await ack
            return sent

        warm = time.perf_counter() + min(1.0, seconds / 4)
        await asyncio.gather(*(producer(i, warm) for i in range(PRODUCERS)))
        server = server_cpu_s() if server_cpu_s else 0.0
        cpu, begun = time.process_time(), time.perf_counter()
        counts = await asyncio.gather(*(producer(i, begun + seconds) for i in range(PRODUCERS)))
        elapsed, cpu = time.perf_counter() - begun, time.process_time() - cpu
        server = server_cpu_s() - server if server_cpu_s else 0.0
        acknowledged = sum(counts)
        enqueue_us = await _enqueue_cost_us(writer, segments[0], payload)
    per_s = acknowledged / elapsed
    figures = {
        "records_per_s": per_s,
        "mb_per_s": per_s * payload_bytes / 1e6,
        "client_cpu_us_per_record": cpu / acknowledged * 1e6,
        "enqueue_us_per_record": enqueue_us,
    }
    if server_cpu_s is not None:
        figures["server_cpu_us_per_record"] = server / acknowledged * 1e6
    return figures


async def _awaited_writes(
    url: str, payload_bytes: int, seconds: float, max_in_flight: int = 4
) -> dict[str, float]:
    """Records/s when each of the producer tasks awaits every ``write`` before the next, and
    this process's CPU per record. Each counted record was acknowledged in the measured time."""
    segments = [f"bench/awaited-{max_in_flight}-{i:02d}" for i in range(SEGMENTS)]
    await create_segments(url, segments, exist_ok=True)  # a later round of the same server
    payload = os.urandom(payload_bytes)
    async with (
        AsyncSegmentStoreClient(url) as client,
        EventWriter(client, linger_ms=2, max_in_flight=max_in_flight) as writer,
    ):

        async def producer(index: int, until: float) -> int:
            segment = segments[index % len(segments)]
            written = 0
            while time.perf_counter() < until:
                await writer.write(segment, payload)
                written += 1
            return written

        warm = time.perf_counter() + min(1.0, seconds / 4)
        await asyncio.gather(*(producer(i, warm) for i in range(PRODUCERS)))
        cpu, begun = time.process_time(), time.perf_counter()
        counts = await asyncio.gather(*(producer(i, begun + seconds) for i in range(PRODUCERS)))
        elapsed, cpu = time.perf_counter() - begun, time.process_time() - cpu
    written = sum(counts)
    per_s = written / elapsed
    return {
        "records_per_s": per_s,
        "mb_per_s": per_s * payload_bytes / 1e6,
        "client_cpu_us_per_record": cpu / max(1, written) * 1e6,
    }


async def _enqueue_cost_us(writer: EventWriter, segment: str, payload: bytes) -> float:
    """The writer's own work per record (``send``: framing, batching, the ack) in µs: timed
    in one stretch that never yields to the loop, so nothing is sent meanwhile."""
    records = 20_000
    acks = []
    begun = time.perf_counter()
    for _ in range(records):
        acks.append(await writer.send(segment, payload))
    elapsed = time.perf_counter() - begun
    for ack in acks:
        await ack
    return elapsed / records * 1e6


async def _latency(url: str, seconds: float) -> dict[str, float]:
    """Append-to-read latency: write through an EventWriter, read with an EventReader."""
    segment = "bench/latency"
    await create_segments(url, [segment])
    latencies: list[float] = []
    sent_at: dict[int, float] = {}
    async with AsyncSegmentStoreClient(url) as client:
        reader = EventReader(client, segment, wait_ms=1000)

        async def consume(expected: int) -> None:
            async for _, payload in reader:
                latencies.append(time.perf_counter() - sent_at[int(payload)])
                if len(latencies) == expected:
                    return

        records = max(1, int(seconds / LATENCY_INTERVAL_S))
        consumer = asyncio.create_task(consume(records))
        async with EventWriter(client, linger_ms=1) as writer:
            for number in range(records):
                sent_at[number] = time.perf_counter()
                await writer.send(segment, str(number).encode())
                await asyncio.sleep(LATENCY_INTERVAL_S)
        await asyncio.wait_for(consumer, 60)
    latencies.sort()
    return {
        "p50_ms": percentile(latencies, 0.5) * 1000,
        "p99_ms": percentile(latencies, 0.99) * 1000,
    }


def run(
    seconds: float,
    loadgen: str,
    processes: int,
    loop: str,
    directory: str | None,
    json_path: str | None,
    environ: Mapping[str, str],
) -> list[dict[str, Any]]:
    loadgen = choose_loadgen(loadgen)
    load_before = os.getloadavg()
    print(f"... load average {_load(load_before)}", flush=True)
    base = Path(tempfile.mkdtemp(prefix="bench-client-", dir=directory))
    case = dataclasses.replace(cases()["append-1k"], connections=APPEND_TASKS)
    rows: list[dict[str, Any]] = []
    print(f"... starting the store (baseline load: {loadgen}, client loop: {loop})", flush=True)
    store = store_process(base, environ)
    try:
        store.wait_ready(STARTUP_TIMEOUT_S)
        url = store.url
        run_loop(create_segments(url, append_segments()), loop)

        def step(title: str) -> None:
            print(f"... {title}, {seconds:g} s", flush=True)

        step(f"{loadgen}: 1 KiB appends, {APPEND_TASKS} connections")
        baseline = measure(loadgen, url, case, seconds, processes, base)
        wrk_per_s = baseline.requests / baseline.seconds
        wait_quiet(url)

        def row(name: str, per_s: float, mb_per_s: float, **extra: float) -> dict[str, Any]:
            return {
                "case": name,
                "per_s": per_s,
                "mb_per_s": mb_per_s,
                "vs_baseline": per_s / wrk_per_s,
                **extra,
            }

        rows.append(
            row(f"{loadgen} append 1 KiB x{APPEND_TASKS}", wrk_per_s, wrk_per_s * KiB / 1e6)
        )
        for how in ("client", "aiohttp", "httpx"):
            label = {"client": "client", "aiohttp": "bare aiohttp", "httpx": "client on httpx"}[how]
            step(f"{label}: 1 KiB appends, {APPEND_TASKS} tasks")
            figures = run_loop(appends(url, seconds, how), loop)
            per_s = figures.pop("per_s")
            rows.append(
                row(f"{label} append 1 KiB x{APPEND_TASKS}", per_s, per_s * KiB / 1e6, **figures)
            )
            wait_quiet(url)
        # One batch per segment on the wire is how the writer sent before batches were
        # chained: the same run's figure for it is what each EventWriter case is compared with.
        writers = [
            ("send()", writer_records, KiB, 4),
            ("send()", writer_records, KiB, 1),
            ("send()", writer_records, 100, 4),
            ("write()", _awaited_writes, KiB, 4),
            ("write()", _awaited_writes, KiB, 1),
        ]
        for how, measure_writer, size, in_flight in writers:
            label = f"EventWriter {how} {size} B x{PRODUCERS}"
            if in_flight == 1:
                label += ", max_in_flight=1"
            step(label)
            figures = run_loop(measure_writer(url, size, seconds, in_flight), loop)
            rows.append(
                row(label, figures.pop("records_per_s"), figures.pop("mb_per_s"), **figures)
            )
            wait_quiet(url)
        step("append-to-read latency")
        latency = run_loop(_latency(url, seconds), loop)
    finally:
        store.stop()
        shutil.rmtree(base, ignore_errors=True)
    for found in rows:
        _judge(found)
    load = {"before": list(load_before), "after": list(os.getloadavg())}
    _print(rows, latency, load)
    write_json(
        json_path,
        "client",
        [*rows, {"case": "append-to-read latency", **latency}, {"case": "load average", **load}],
    )
    return rows


def _judge(row: dict[str, Any]) -> None:
    """Adds ``target`` and ``met`` to a row that has a target."""
    if row["case"] in TARGETS:
        key, least = TARGETS[row["case"]]
        row["target"] = f"{key} >= {least:,g}"
        row["met"] = row[key] >= least


def _load(averages: tuple[float, ...] | list[float]) -> str:
    return " ".join(f"{value:.2f}" for value in averages) + " (1, 5, 15 min)"


def _print(
    rows: list[dict[str, Any]], latency: dict[str, float], load: dict[str, list[float]]
) -> None:
    shown = [
        {**row, "verdict": f"{'met' if row['met'] else 'MISSED'} {row['target']}"}
        if "met" in row
        else {**row, "verdict": ""}
        for row in rows
    ]
    print_table(
        shown,
        [
            ("case", "case", ""),
            ("per_s", "records/s", ",.0f"),
            ("mb_per_s", "MB/s", ",.1f"),
            ("vs_baseline", "vs baseline", ".2f"),
            ("verdict", "target", ""),
        ],
    )
    print()
    print_table(
        [r for r in rows if "client_cpu_us_per_record" in r],
        [("case", "case", ""), ("client_cpu_us_per_record", "client CPU µs/rec", ".2f")],
    )
    writers = [r for r in rows if "enqueue_us_per_record" in r]
    print()
    print_table(
        writers,
        [("case", "case", ""), ("enqueue_us_per_record", "send() µs/rec", ".2f")],
    )
    print(
        f"\nappend-to-read latency (EventWriter -> EventReader): p50 {latency['p50_ms']:.2f} ms,"
        f" p99 {latency['p99_ms']:.2f} ms"
    )
    print(f"load average before: {_load(load['before'])}, after: {_load(load['after'])}")
