"""``/metrics`` on a node of several workers: every series of a worker carries its ``worker``
label (``w0``, ``w1``, ...), and the node's port shows the whole node.

A worker answers ``/metrics`` on its own port with its own series; on the node's port (where
Prometheus and the status page ask) it gathers its siblings' from their own ports (signed, as
a cluster gathers its listings) and answers them all, each family once with every worker's
samples. A worker that is down is missing from the answer until it is back; its restarts are
counted by ``segmentstore_worker_starts_total``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import aiohttp
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from segmentstore.api.forwarding import ForwardingSession, PeerBusy
from segmentstore.workers.place import WorkerPlace


class WorkerCollector(Collector):
    """A worker's own figures: how often it was started, the connections it handed to its
    siblings and took from them (:mod:`.worker_handoff`), and the requests it relayed to them
    (:mod:`.worker_relay`)."""

    def __init__(self, worker: WorkerPlace, app_state: Any, forwarding: ForwardingSession) -> None:
        self.worker = worker
        self.app_state = app_state
        self.forwarding = forwarding

    def collect(self) -> Iterator[Metric]:
        yield CounterMetricFamily(
            "segmentstore_worker_starts",
            "times this worker was started (more than once: it died and was started again)",
            self.worker.board.starts(self.worker.index),
        )
        hand_off = getattr(self.app_state, "hand_off", None)
        figures = (
            ("handed", "connections this worker handed to the sibling owning their request"),
            ("adopted", "connections a sibling handed to this worker"),
            ("not_taken", "hand-offs a sibling did not take (served here: forwarded or 503)"),
        )
        for figure, meaning in figures:
            yield CounterMetricFamily(
                f"segmentstore_worker_connections_{figure}",
                meaning,
                getattr(hand_off, figure, 0),
            )
        relay = getattr(self.app_state, "relay", None)
        yield CounterMetricFamily(
            "segmentstore_worker_relayed_requests",
            "requests for a sibling's container this worker relayed to it",
            getattr(relay, "relayed", 0),
        )
        yield CounterMetricFamily(
            "segmentstore_worker_relay_connections_opened",
            "connections this worker opened to its siblings to relay requests on",
            getattr(relay, "opened", 0),
        )
        yield CounterMetricFamily(
            "segmentstore_worker_relay_failures",
            "relayed requests whose sibling went away before its answer was whole",
            getattr(relay, "failed", 0),
        )
        yield CounterMetricFamily(
            "segmentstore_worker_forwarded_requests",
            "requests this worker passed to a sibling over HTTP (they could not be handed on)",
            self.forwarding.forwarded,
        )


def labelled(text: bytes, worker: str) -> bytes:
    """``text`` (Prometheus' text format) with ``worker="<worker>"`` on every sample."""
    label = f'worker="{worker}"'.encode()
    lines = []
    for line in text.split(b"\n"):
        if line and not line.startswith(b"#"):
            brace, space = line.find(b"{"), line.find(b" ")
            if 0 <= brace < space:
                rest = line[brace + 1 :]
                line = (
                    line[: brace + 1] + label + (b"," if not rest.startswith(b"}") else b"") + rest
                )
            elif space > 0:
                line = line[:space] + b"{" + label + b"}" + line[space:]
        lines.append(line)
    return b"\n".join(lines)


def merged(texts: list[bytes]) -> bytes:
    """Several expositions as one: each family's ``# HELP`` and ``# TYPE`` once, followed by
    the samples of every text, families in the order they first appear."""
    families: dict[bytes, tuple[list[bytes], list[bytes]]] = {}
    for text in texts:
        current: tuple[list[bytes], list[bytes]] | None = None
        for line in text.split(b"\n"):
            if not line:
                continue
            if line.startswith(b"# HELP ") or line.startswith(b"# TYPE "):
                name = line.split(b" ", 3)[2]
                current = families.setdefault(name, ([], []))
                if line not in current[0]:
                    current[0].append(line)
            elif line.startswith(b"#"):
                continue
            elif current is not None:
                current[1].append(line)
    out = [line for header, samples in families.values() for line in (*header, *samples)]
    return b"\n".join(out) + b"\n"


async def node_exposition(worker: WorkerPlace, forwarding: ForwardingSession, own: bytes) -> bytes:
    """The whole node's series: this worker's (``own``, labelled already) and those of every
    sibling that answers on its own port."""

    async def ask(index: int) -> bytes | None:
        try:
            async with forwarding.get(worker.urls[index], "/metrics", "", {}) as (reply, _):
                return await reply.read() if reply.status == 200 else None
        except (aiohttp.ClientError, OSError, TimeoutError, PeerBusy):
            return None

    siblings = [i for i in range(worker.count) if i != worker.index]
    answers = await asyncio.gather(*(ask(i) for i in siblings))
    texts = [own]
    for index in range(worker.count):
        if index == worker.index:
            continue
        answer = answers[siblings.index(index)]
        if answer is not None:
            texts.append(answer)
    return merged(texts)
