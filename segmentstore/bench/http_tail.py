"""Append-to-tail-read latency over HTTP, for ``segmentstore bench http``.

Two keep-alive connections to the store, raw HTTP/1.1 over asyncio sockets (so the figure is
the server's, not a client library's): a reader parks ``:read?offset=L&wait_ms=...`` at the
tail of a segment of length ``L``; a moment later a writer appends 1 KiB there. The latency
is from the append's last byte sent to the read's answer received: the append made durable
(the Tier 1 fsync included), applied, and the waiting read woken and answered.
"""

from __future__ import annotations

import asyncio
import json
import time

from segmentstore.bench.http_cases import TAIL_SEGMENT, KiB, payload
from segmentstore.bench.http_load import read_answer
from segmentstore.bench.report import percentile

PARK_S = 0.002  # long enough for the read to be parked at the tail when the append comes
WAIT_MS = 5000


async def _measure(port: int, samples: int) -> list[float]:
    reader_in, reader_out = await asyncio.open_connection("127.0.0.1", port)
    writer_in, writer_out = await asyncio.open_connection("127.0.0.1", port)
    body = payload(KiB, seed=4)
    path = f"/v1/segments/{TAIL_SEGMENT}"
    host = f"Host: 127.0.0.1:{port}\r\n"
    append = (
        f"POST {path}:append HTTP/1.1\r\n{host}Content-Type: application/octet-stream\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    latencies: list[float] = []
    # The segment may already hold data (an earlier round): start at its end.
    offset = await _length(writer_in, writer_out, path, host)
    try:
        for _ in range(samples):
            read = f"GET {path}:read?offset={offset}&wait_ms={WAIT_MS} HTTP/1.1\r\n{host}\r\n"
            reader_out.write(read.encode())
            await reader_out.drain()
            await asyncio.sleep(PARK_S)
            writer_out.write(append)
            await writer_out.drain()
            sent = time.perf_counter()
            status = await read_answer(reader_in)
            latencies.append(time.perf_counter() - sent)
            if status != 200 or await read_answer(writer_in) != 200:
                raise RuntimeError(f"tail read or append answered {status}")
            offset += len(body)
    finally:
        reader_out.close()
        writer_out.close()
    return latencies


async def _length(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, path: str, host: str
) -> int:
    writer.write(f"GET {path} HTTP/1.1\r\n{host}\r\n".encode())
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        key, _, value = line.partition(b":")
        if key.lower() == b"content-length":
            length = int(value)
    info = await reader.readexactly(length)
    return int(json.loads(info)["length"])


def tail_latency_ms(url: str, samples: int) -> dict[str, float]:
    """p50 and p99 of ``samples`` append-to-tail-read latencies against the store at ``url``."""
    port = int(url.rsplit(":", 1)[1])
    try:
        import uvloop
    except ImportError:  # pragma: no cover
        latencies = asyncio.run(_measure(port, samples))
    else:
        latencies = uvloop.run(_measure(port, samples))
    latencies.sort()
    return {
        "p50_ms": percentile(latencies, 0.5) * 1000,
        "p99_ms": percentile(latencies, 0.99) * 1000,
    }
