"""Concurrent exactly-once HTTP writers spread over the nodes of a cluster, and the check
that everything they were told is durable is there, byte for byte, exactly once.

Each writer appends to a segment of its own with ``Writer-Id``/``Writer-Seq``, one request at
a time, each to a node picked at random from ``urls()`` (a load balancer's view: the test
removes a node it is about to stop). An answer that is not ``200`` is retried with the same
sequence number until one is, so the segment must end up holding exactly payloads ``0..n-1``
in order: an append applied twice, or lost after its ``200``, shows as a difference.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import Callable

import httpx

WRITERS = 12
# Idle connections are dropped well before the server's 5 s keep-alive ends: a request sent on
# a connection the server is closing that moment is lost on the way (as with any HTTP server).
_POOL = httpx.Limits(keepalive_expiry=2.0)


def payload(writer: int, seq: int) -> bytes:
    return f"<{writer}:{seq}>".encode() * 25


class ClusterWriters:
    def __init__(self, urls: Callable[[], list[str]], prefix: str, writers: int = WRITERS) -> None:
        self.urls = urls
        self.segments = [f"{prefix}/w{w}" for w in range(writers)]
        self.acked: dict[str, dict[int, int]] = {s: {} for s in self.segments}  # seq -> offset
        self.sent: dict[str, int] = dict.fromkeys(self.segments, 0)
        self.statuses: Counter[int] = Counter()
        self.transport_errors = 0
        self.lost_connections: list[str] = []  # which node, and how
        self.duplicates = 0
        self.bad: list[str] = []
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    async def create(self) -> None:
        async with httpx.AsyncClient(timeout=30, limits=_POOL) as http:
            for segment in self.segments:
                answer = await self._until_done(http, "PUT", f"/v1/segments/{segment}", b"")
                assert answer.status_code == 201, answer.text

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._write(w)) for w in range(len(self.segments))]

    async def stop(self) -> None:
        self._stop.set()
        await asyncio.gather(*self._tasks)

    async def _until_done(
        self, http: httpx.AsyncClient, method: str, path: str, body: bytes, **headers: str
    ) -> httpx.Response:
        """Send until an answer other than 503 (or a lost connection) comes back."""
        while True:
            url = random.choice(self.urls())
            try:
                answer = await http.request(method, url + path, content=body, headers=headers)
            except httpx.TransportError as error:
                self.transport_errors += 1
                self.lost_connections.append(f"{url}: {error!r}")
                await asyncio.sleep(0.1)
                continue
            self.statuses[answer.status_code] += 1
            if answer.status_code != 503:
                return answer
            error = answer.json()["error"]
            if error["code"] != "container_unavailable" or "retry-after" not in answer.headers:
                self.bad.append(f"a 503 without its shape: {answer.headers} {error}")
            await asyncio.sleep(0.1)

    async def _write(self, writer: int) -> None:
        segment = self.segments[writer]
        path = f"/v1/segments/{segment}:append"
        async with httpx.AsyncClient(timeout=60, limits=_POOL) as http:
            seq = 0
            while not self._stop.is_set():
                headers = {"Writer-Id": f"w{writer}", "Writer-Seq": str(seq)}
                answer = await self._until_done(http, "POST", path, payload(writer, seq), **headers)
                if answer.status_code != 200:
                    self.bad.append(f"{segment} seq {seq}: {answer.status_code} {answer.text}")
                    return
                body = answer.json()
                if body.get("duplicate"):
                    self.duplicates += 1  # applied before, its answer lost: not applied again
                else:
                    self.acked[segment][seq] = body["offset"]
                seq += 1
                self.sent[segment] = seq

    def verify(self, url: str) -> None:
        """Every segment holds exactly payloads 0..n-1, each acknowledged one at its offset."""
        assert not self.bad, self.bad[:5]
        with httpx.Client(base_url=url, timeout=60) as http:
            for writer, segment in enumerate(self.segments):
                expected = b"".join(payload(writer, s) for s in range(self.sent[segment]))
                data = read_whole(http, segment)
                assert data == expected, f"{segment}: {len(data)} bytes, expected {len(expected)}"
                for seq, offset in self.acked[segment].items():
                    piece = payload(writer, seq)
                    assert data[offset : offset + len(piece)] == piece, (segment, seq)

    @property
    def appended(self) -> int:
        return sum(self.sent.values())


def read_whole(http: httpx.Client, segment: str) -> bytes:
    """The whole segment, retrying 503s (a container that is moving) as a client does."""
    length = _get(http, f"/v1/segments/{segment}").json()["length"]
    data = b""
    while len(data) < length:
        data += _get(http, f"/v1/segments/{segment}:read", offset=len(data)).content
    return data


def _get(http: httpx.Client, path: str, **params: int) -> httpx.Response:
    deadline = time.monotonic() + 30
    while True:
        answer = http.get(path, params=params)
        if answer.status_code != 503 or time.monotonic() > deadline:
            assert answer.status_code == 200, answer.text
            return answer
        time.sleep(0.2)
