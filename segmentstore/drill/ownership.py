"""Who served each container when, and the check that no append was acknowledged by a node that
had already lost the container to a newer owner.

While a cluster drill runs, :class:`OwnershipSampler` asks every node directly (not through the
switchboard, so a partition does not hide it) which containers it holds itself and at which
epoch, a few times a second. The drill's writers record, for every acknowledged append, the node
that answered it (the owner a request was forwarded to, else the node it was sent to) and when
it was sent and answered.

An append to container ``c`` acknowledged by node ``X`` is *stale* when, before it was even
sent, another node had been seen serving ``c`` at an epoch higher than any at which ``X`` held
``c`` up to its answer: ``X`` had been fenced out, and a write it acknowledged then is one the new
owner never saw. (A new owner raises the epoch when it opens the container, before it serves
it; an older owner's append sent before that may be acknowledged and is then in the log the new
owner recovers from.) Samples are taken every ``interval_s``, so a node's epoch is looked for in
its samples up to a few intervals after the answer.

A node that takes a container over answers appends as soon as it has recovered, and may hand
the container on again within one sampling interval, so that no sample shows its epoch (while
it recovers, it shows none). Its epoch is above every epoch opened before it began to take the
container: above every epoch seen before the last sample, answered before the append was sent,
that showed it not holding the container. No epoch that low makes it stale.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from segmentstore.contracts.mapping import container_of
from segmentstore.drill.load import AnsweredBy
from segmentstore.harness.store_nodes import StoreNodes

_SLACK_INTERVALS = 4


@dataclass(frozen=True)
class Claim:
    at: float  # monotonic, when the node's answer came
    node: str
    epoch: int | None  # None: it holds the container and still recovers it


@dataclass
class _Absences:
    """When a node was seen not holding a container: for each such sample, when it was asked
    and when it answered (the node looked at its containers in between)."""

    asked: array[float]
    answered: array[float]

    def last_asked_before(self, at: float) -> float | None:
        """When the last sample answered before ``at`` was asked."""
        i = bisect.bisect_left(self.answered, at)
        return self.asked[i - 1] if i else None


class OwnershipSampler:
    def __init__(self, nodes: StoreNodes, interval_s: float = 0.25) -> None:
        self._nodes = nodes
        self.interval_s = interval_s
        self.claims: dict[int, list[Claim]] = {}
        self.absences: dict[tuple[int, str], _Absences] = {}  # (container, node)
        self.samples = 0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="drill-ownership")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        async with httpx.AsyncClient(timeout=1) as client:
            while True:
                started = time.monotonic()
                await asyncio.gather(
                    *(self._sample(client, n.node_id, n.url) for n in self._nodes.live)
                )
                await asyncio.sleep(max(0.0, started + self.interval_s - time.monotonic()))

    async def _sample(self, client: httpx.AsyncClient, node: str, url: str) -> None:
        with contextlib.suppress(httpx.HTTPError, ValueError, KeyError):
            asked = time.monotonic()
            view = (await client.get(f"{url}/v1/cluster")).json()
            at = time.monotonic()
            self.samples += 1
            for container in view["containers"]:
                cid = int(container["id"])
                if container["owner"] == node:
                    epoch = container["epoch"]
                    claim = Claim(at, node, None if epoch is None else int(epoch))
                    self.claims.setdefault(cid, []).append(claim)
                else:
                    self.absent(cid, node, asked, at)

    def absent(self, container: int, node: str, asked: float, answered: float) -> None:
        """Record a sample of ``node``, asked and answered then, that did not hold it."""
        absences = self.absences.get((container, node))
        if absences is None:
            absences = self.absences[container, node] = _Absences(array("d"), array("d"))
        absences.asked.append(asked)
        absences.answered.append(answered)

    def stale_acknowledgements(
        self,
        answered_by: dict[str, dict[tuple[int, int], AnsweredBy]],
        containers: int,
        node_at: Callable[[str], str | None],
    ) -> list[str]:
        """Every acknowledged append whose node had been fenced out before it was sent."""
        found = []
        slack = self.interval_s * _SLACK_INTERVALS
        timelines: dict[int, _Timeline] = {}
        for name, answers in answered_by.items():
            container = container_of(name, containers)
            if container not in timelines:
                timelines[container] = _Timeline(self.claims.get(container, []))
            timeline = timelines[container]
            for key, (sent_to, owner, sent, answered) in answers.items():
                node = node_at(owner) if owner else node_at(sent_to)
                if node is None:
                    found.append(f"{name}: append {key} answered by an unknown node {sent_to}")
                    continue
                rival = timeline.others_before(node, sent)
                own = timeline.own_until(node, answered + slack)
                absences = self.absences.get((container, node))
                last_absent = absences.last_asked_before(sent) if absences else None
                if last_absent is not None:
                    own = max(own, timeline.any_before(last_absent) + 1)
                if rival > own:
                    found.append(
                        f"{name}: append {key} acknowledged by {node} (epoch at most {own})"
                        f" after another node served epoch {rival}"
                    )
        return found


class _Timeline:
    """One container's claims in time order, with running maxima of the epochs claimed by each
    node, by everyone but it and by anyone: each question is a binary search."""

    def __init__(self, claims: list[Claim]) -> None:
        ordered = sorted(claims, key=lambda c: c.at)
        self._at = [c.at for c in ordered]
        self._own: dict[str, list[int]] = {}
        self._others: dict[str, list[int]] = {}
        for node in {c.node for c in ordered}:
            own, others = -1, -1
            own_max, others_max = [], []
            for claim in ordered:
                epoch = -1 if claim.epoch is None else claim.epoch
                if claim.node == node:
                    own = max(own, epoch)
                else:
                    others = max(others, epoch)
                own_max.append(own)
                others_max.append(others)
            self._own[node], self._others[node] = own_max, others_max
        self._any: list[int] = [max(row) for row in zip(*self._own.values(), strict=True)]

    def others_before(self, node: str, at: float) -> int:
        """The highest epoch another node was seen serving before ``at`` (-1: none)."""
        i = bisect.bisect_left(self._at, at)
        if i == 0:
            return -1
        if node in self._others:
            return self._others[node][i - 1]
        return self._any[i - 1]

    def own_until(self, node: str, at: float) -> int:
        """The highest epoch ``node`` was seen serving up to ``at`` (-1: none)."""
        i = bisect.bisect_right(self._at, at)
        return -1 if i == 0 or node not in self._own else self._own[node][i - 1]

    def any_before(self, at: float) -> int:
        """The highest epoch any node was seen serving before ``at`` (-1: none)."""
        i = bisect.bisect_left(self._at, at)
        return -1 if i == 0 else self._any[i - 1]
