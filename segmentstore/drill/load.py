"""The drill's load: exactly-once writers over many segments and tail readers, over HTTP.

Each writer has a ``Writer-Id`` and, per segment, a ``Writer-Seq`` it never moves past before
the append is resolved: an answer with an offset (acknowledged), ``duplicate`` (an earlier try
landed), or a refusal to retry (``429``, ``503``, ``507``, a broken connection), after which the
same sequence is sent again. So a fault can delay an append but never make it land twice.
Tail readers follow segments with waiting reads and check every record as it arrives.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx

from segmentstore.drill.ledger import SegmentLedger
from segmentstore.drill.payload import HEADER_BYTES, parse, record

_RETRY_MIN_S = 0.05
_RETRY_MAX_S = 1.0
_SKEW = 3  # the power a uniform draw is raised to before it picks a segment
_CREATORS = 32  # segments created at once before the load starts
_CREATION_PROGRESS_EVERY_S = 5.0
# Answers after which the same append is simply sent again.
RETRIED_STATUSES = frozenset({429, 502, 503, 504, 507})
AnsweredBy = tuple[str, str | None, float, float]


def segment_path(name: str) -> str:
    return "/v1/segments/" + quote(name, safe="/")


async def answered(
    client: httpx.AsyncClient, method: str, path: str, timeout_s: float = 60, **request: Any
) -> httpx.Response:
    """The first answer that is not a refusal to retry: in a cluster a container can be moving
    (``503``) or a node restarting at any moment, the drill's set-up included."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        try:
            answer = await client.request(method, path, **request)
        except httpx.TransportError:
            if loop.time() > deadline:
                raise
        else:
            if answer.status_code not in RETRIED_STATUSES or loop.time() > deadline:
                return answer
        await asyncio.sleep(_RETRY_MIN_S * 4)


@dataclass
class LoadStats:
    acknowledged: int = 0
    acknowledged_bytes: int = 0
    duplicates_answered: int = 0
    retries: int = 0
    answers: Counter[str] = field(default_factory=Counter)  # "507", "connection", ...
    unexpected: list[str] = field(default_factory=list)
    read_bytes: int = 0
    reader_torn: int = 0


class Load:
    def __init__(
        self,
        client: httpx.AsyncClient,
        segments: list[str],
        writers: int,
        readers: int,
        payload_bytes: tuple[int, int],
        seed: int,
    ) -> None:
        self._client = client
        self.segments = segments
        self.ledgers = {name: SegmentLedger() for name in segments}
        # per segment, acknowledged append -> (URL it was sent to, the Segment-Owner that
        # answered it, monotonic times it was sent and answered): which node acknowledged it
        self.answered_by: dict[str, dict[tuple[int, int], AnsweredBy]] = {
            name: {} for name in segments
        }
        self.stats = LoadStats()
        self._writers = writers
        self._readers = readers
        self._payload_bytes = payload_bytes
        self._rng = random.Random(seed)
        self._stopping = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    async def create_segments(self, created: Callable[[int], None] = lambda _count: None) -> None:
        """Create every segment (an existing one is fine); ``created`` hears the count made so
        far every few seconds, and once at the end (hundreds of thousands take minutes)."""
        names = iter(self.segments)
        done = 0
        told = time.monotonic()

        async def creator() -> None:
            nonlocal done, told
            for name in names:
                answer = await answered(self._client, "PUT", segment_path(name))
                if answer.status_code not in (201, 409):
                    raise RuntimeError(f"cannot create {name}: {answer.status_code} {answer.text}")
                done += 1
                if time.monotonic() - told >= _CREATION_PROGRESS_EVERY_S:
                    told = time.monotonic()
                    created(done)

        await asyncio.gather(*(creator() for _ in range(min(_CREATORS, len(self.segments)))))
        created(done)

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        for w in range(self._writers):
            rng = random.Random(self._rng.random())
            self._tasks.append(loop.create_task(self._write(w, rng), name=f"drill-writer-{w}"))
        for r in range(self._readers):
            name = self.segments[r % len(self.segments)]
            self._tasks.append(loop.create_task(self._follow(name), name=f"drill-reader-{r}"))

    async def stop(self) -> None:
        self._stopping.set()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for task in self._tasks:
            if not task.cancelled() and task.exception() is not None:
                self.stats.unexpected.append(f"{task.get_name()} died: {task.exception()!r}")

    # -- writers ------------------------------------------------------------------------

    async def _write(self, writer: int, rng: random.Random) -> None:
        count = len(self.segments)
        while not self._stopping.is_set():
            # A skewed popularity: a few segments take most appends, most are touched now and
            # then, so that over many segments some keep going idle, leaving the node's memory
            # and coming back (half the appends go to the first eighth of the segments).
            name = self.segments[int(count * rng.random() ** _SKEW)]
            ledger = self.ledgers[name]
            seq = ledger.last_seq.get(writer, 0) + 1
            size = rng.randint(*self._payload_bytes)
            data = record(writer, seq, size)
            if await self._append_until_resolved(name, ledger, writer, seq, data):
                ledger.last_seq[writer] = seq

    async def _append_until_resolved(
        self, name: str, ledger: SegmentLedger, writer: int, seq: int, data: bytes
    ) -> bool:
        """True once answered; False if the drill stopped first (the append is in flight:
        it may still land, so it is not one whose retry must be answered ``duplicate``)."""
        key = (writer, seq)
        ledger.in_flight.add(key)
        delay = _RETRY_MIN_S
        headers = {"Writer-Id": f"drill-w{writer}", "Writer-Seq": str(seq)}
        while True:
            sent = time.monotonic()
            try:
                answer = await self._client.post(
                    segment_path(name) + ":append", content=data, headers=headers
                )
            except httpx.TransportError as error:
                self.stats.answers[type(error).__name__] += 1
            else:
                self.stats.answers[str(answer.status_code)] += 1
                if answer.status_code == 200:
                    body = answer.json()
                    ledger.in_flight.discard(key)
                    if body.get("duplicate"):
                        self.stats.duplicates_answered += 1
                        ledger.applied_elsewhere.add(key)
                    else:
                        ledger.acknowledged[key] = (body["offset"], len(data))
                        owner = answer.headers.get("segment-owner")
                        by = (str(answer.request.url), owner, sent, time.monotonic())
                        self.answered_by[name][key] = by
                        self.stats.acknowledged += 1
                        self.stats.acknowledged_bytes += len(data)
                    return True
                if answer.status_code not in RETRIED_STATUSES:
                    self.stats.unexpected.append(
                        f"append to {name}: {answer.status_code} {answer.text[:200]}"
                    )
            if self._stopping.is_set():
                return False  # left in flight: whole or absent
            self.stats.retries += 1
            await asyncio.sleep(delay)
            delay = min(delay * 2, _RETRY_MAX_S)

    # -- tail readers -------------------------------------------------------------------

    async def _follow(self, name: str) -> None:
        offset, pending = 0, b""
        while not self._stopping.is_set():
            try:
                answer = await self._client.get(
                    segment_path(name) + ":read",
                    params={"offset": offset + len(pending), "wait_ms": 500},
                )
            except httpx.TransportError:
                await asyncio.sleep(_RETRY_MIN_S)
                continue
            if answer.status_code != 200:
                await asyncio.sleep(_RETRY_MIN_S)
                continue
            self.stats.read_bytes += len(answer.content)
            pending += answer.content
            parsed = parse(pending, offset, final=False)
            if parsed.torn_at is not None:
                self.stats.reader_torn += 1
                self.stats.unexpected.append(f"tail reader of {name}: {parsed.reason}")
                return
            consumed = parsed.end - offset
            offset, pending = parsed.end, pending[consumed:]
            if len(pending) > HEADER_BYTES << 20:
                return  # cannot happen with the drill's own records; do not grow forever
