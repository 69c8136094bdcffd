"""The faults a drill injects, each from its start to the moment the store has healed.

Recovery time is measured from the kill (``kill``, ``torn_tail``), from the restart request
(``container_restart``), or from the moment the fault is lifted (the out-of-space and outage
faults, which last as long as the drill holds them) until every container runs and a probe
append to each one is acknowledged. While an outage or a full disk is held, the drill checks
what the store promises meanwhile: reads keep working, and (Tier 2) no container stops.

In a spawned cluster, a node's SIGKILL or pause and a JetStream server's SIGKILL are measured
from the fault until the other nodes hold every container and appends succeed, the broken
process still down; it is then mended (restarted, or woken) and the cluster must settle again
within the same limit.

A power loss (``power_loss``: the node; ``jetstream_power_loss``: all three JetStream servers
at once) kills the processes and drops, at random from a seed the note gives, what their lazyfs
mounts had not synced; they are started again at once, and recovery is measured from the kill
(see ``power_loss``).

A partition of a spawned cluster (``partitions.PARTITION_KINDS``) is measured from its heal
until the cluster has settled again with every node and appends succeed; what was seen while it
was held is in its note and measures.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import httpx

from segmentstore.drill.deployment import Deployment
from segmentstore.drill.load import answered, segment_path
from segmentstore.drill.partitions import PARTITION_KINDS, Partitions
from segmentstore.drill.power_loss import LosesPower

SINGLE_NODE_KINDS = (
    "kill",
    "container_restart",
    "tier2_outage",
    "tier2_full",
    "tier1_full",
    "torn_tail",
    "power_loss",
)
CLUSTER_KINDS = (
    "kill",
    "node_pause",
    "node_leave",
    "jetstream_kill",
    "container_restart",
    "tier2_outage",
    *PARTITION_KINDS,
)
# One node whose Tier 1 is a JetStream cluster of three servers (jetstream_power.py).
JETSTREAM_NODE_KINDS = ("kill", "container_restart", "jetstream_power_loss")
KINDS = (
    *SINGLE_NODE_KINDS,
    "node_pause",
    "node_leave",
    "jetstream_kill",
    "jetstream_power_loss",
    *PARTITION_KINDS,
)
POWER_LOSSES = frozenset({"power_loss", "jetstream_power_loss"})
# Injected in a cluster by breaking a process, healing without it, and mending it.
NODE_FAULTS = frozenset({"kill", "node_pause", "node_leave", "jetstream_kill"})
PROBE_PREFIX = "drill-probe/"
_STEADY_LAG_BYTES = 1 << 20


@runtime_checkable
class Cluster(Protocol):
    """What a spawned cluster adds to a deployment (see ``cluster_deployment``)."""

    def transport(self, limits: httpx.Limits, seed: int) -> httpx.AsyncBaseTransport:
        """Sends each request to a node that can answer now."""
        ...

    async def settled(self) -> bool: ...

    async def break_(self, kind: str, rng: random.Random) -> str: ...

    async def mend(self, kind: str) -> str: ...

    def aftermath(self, kind: str) -> str: ...

    def stale_acknowledgements(self, answered_by: dict[str, Any]) -> list[str]: ...

    # The partition faults of its network (None until it has started).
    partitions: Partitions | None


@dataclass
class Outcome:
    recovery_s: float | None
    note: str = ""
    measures: dict[str, Any] = field(default_factory=dict)  # a partition's, while it was held
    problems: list[str] = field(default_factory=list)


class FaultInjector:
    def __init__(
        self,
        deployment: Deployment,
        client: httpx.AsyncClient,
        probes: list[str],
        rng: random.Random,
        hold_s: tuple[float, float],
        limit_s: float,
    ) -> None:
        self._deployment = deployment
        self._client = client
        self._probes = probes
        self._rng = rng
        self._hold_s = hold_s
        self._limit_s = limit_s
        self._cluster = deployment if isinstance(deployment, Cluster) else None

    async def inject(self, kind: str, segments: list[str]) -> Outcome:
        if self._cluster is not None and kind in NODE_FAULTS:
            return await self._break_and_mend(self._cluster, kind)
        if kind in POWER_LOSSES:
            if not isinstance(self._deployment, LosesPower):
                return Outcome(None, "this deployment cannot lose power")
            started = time.monotonic()
            note = await self._deployment.lose_power(kind, self._rng)
            outcome = await self._healed(started)
            outcome.note = f"{note}; {outcome.note}" if outcome.note else note
            return outcome
        if self._cluster is not None and kind in PARTITION_KINDS:
            assert self._cluster.partitions is not None
            held = await self._cluster.partitions.inject(
                kind, self._rng, self._hold_s, self._limit_s, self._probes, self._recovered
            )
            return Outcome(held.recovery_s, held.note, held.measures, held.problems)
        if kind in ("kill", "torn_tail"):
            started = time.monotonic()
            await self._deployment.kill(self._rng, torn_tail=kind == "torn_tail")
            return await self._healed(started)
        if kind == "container_restart":
            container = self._rng.randrange(len(self._probes))
            started = time.monotonic()
            try:
                await self._client.post(f"/v1/containers/{container}:restart", timeout=120)
            except httpx.TransportError as error:
                return Outcome(None, f"restart request failed: {error!r}")
            outcome = await self._healed(started)
            outcome.note = f"container {container}"
            return outcome
        if kind == "tier1_full":
            await self._deployment.tier1_full(True)
        else:
            await self._deployment.tier2(kind, True)
        try:
            note = await self._hold(kind, segments)
        finally:
            if kind == "tier1_full":
                await self._deployment.tier1_full(False)
            else:
                await self._deployment.tier2(kind, False)
        lifted = time.monotonic()
        lag_at_lift = await self._tier2_lag()
        outcome = await self._healed(lifted)
        outcome.note = note
        if kind != "tier1_full":
            outcome.note += await self._caught_up(lifted, lag_at_lift)
        return outcome

    async def _break_and_mend(self, cluster: Cluster, kind: str) -> Outcome:
        """Recovery is the time from the fault until the survivors hold every container and
        appends succeed, with the broken process still down; then it is mended, and must be
        back in the cluster within the same limit."""
        started = time.monotonic()
        hit = await cluster.break_(kind, self._rng)
        outcome = await self._healed(started)
        if outcome.recovery_s is not None:
            await asyncio.sleep(self._rng.uniform(*self._hold_s))  # the survivors serve
        mended = time.monotonic()
        note = await cluster.mend(kind)
        back = await self._healed(mended)
        if outcome.recovery_s is None:
            hit += f" ({outcome.note} while it was down)"
        if back.recovery_s is None:
            return Outcome(None, f"{hit}: {note}, then not settled again: {back.note}")
        outcome.note = f"{hit}: {note}, settled again in {back.recovery_s:.2f} s"
        outcome.note += cluster.aftermath(kind)
        return outcome

    async def _tier2_lag(self) -> int:
        try:
            answer = await self._client.get("/v1/containers", timeout=5)
            return sum(int(c["tier2_lag_bytes"]) for c in answer.json()["containers"])
        except (httpx.TransportError, ValueError, KeyError):
            return -1

    async def _caught_up(self, lifted: float, lag_at_lift: int) -> str:
        """How long Tier 2 took to get back to the lag of steady load (a flush interval's
        worth of appends): the backlog of the fault is written."""
        deadline = lifted + self._limit_s
        while time.monotonic() < deadline:
            lag = await self._tier2_lag()
            if 0 <= lag <= _STEADY_LAG_BYTES:
                took = time.monotonic() - lifted
                return f"; Tier 2 lag {lag_at_lift >> 10} KiB at lift, caught up in {took:.1f} s"
            await asyncio.sleep(0.2)
        return f"; Tier 2 had not caught up {self._limit_s:.0f} s after the fault"

    async def _hold(self, kind: str, segments: list[str]) -> str:
        """Hold the fault, looking at statuses and reads meanwhile; what was seen."""
        until = time.monotonic() + self._rng.uniform(*self._hold_s)
        statuses: set[str] = set()
        failed_reads = 0
        reads = 0
        peak_rss = 0
        while time.monotonic() < until:
            peak_rss = max(peak_rss, self._deployment.rss_bytes() or 0)
            try:
                answer = await self._client.get("/v1/containers")
                statuses |= {c["status"] for c in answer.json()["containers"]}
                name = self._rng.choice(segments)
                read = await self._client.get(
                    segment_path(name) + ":read", params={"offset": 0, "max_length": 4096}
                )
                reads += 1
                failed_reads += read.status_code not in (200, 204)
            except httpx.TransportError:
                failed_reads += 1
            await asyncio.sleep(0.2)
        seen = "/".join(sorted(statuses))
        note = f"held; statuses seen {seen}; reads failed {failed_reads}/{reads}"
        if peak_rss:
            note += f"; node RSS peak {peak_rss >> 20} MiB"
        if kind != "tier1_full" and statuses - {"running"}:
            note += " (a container stopped during a Tier 2 fault)"
        return note

    async def _recovered(self, started: float) -> float | None:
        return (await self._healed(started)).recovery_s

    async def _healed(self, started: float) -> Outcome:
        deadline = started + self._limit_s
        while time.monotonic() < deadline:
            if await self._all_serving():
                return Outcome(time.monotonic() - started)
            await asyncio.sleep(0.05)
        return Outcome(None, f"not healed within {self._limit_s:.0f} s")

    async def _all_serving(self) -> bool:
        if self._cluster is not None and not await self._cluster.settled():
            return False
        try:
            answer = await self._client.get("/v1/containers", timeout=5)
            if answer.status_code != 200:
                return False
            if any(c["status"] != "running" for c in answer.json()["containers"]):
                return False
            for probe in self._probes:
                appended = await self._client.post(
                    segment_path(probe) + ":append", content=b"probe", timeout=5
                )
                if appended.status_code != 200:
                    return False
        except (httpx.TransportError, ValueError):
            return False
        return True


async def find_probes(client: httpx.AsyncClient, containers: int) -> list[str]:
    """One probe segment per container (names tried until each container has one)."""
    found: dict[int, str] = {}
    i = 0
    while len(found) < containers and i < 100 * containers:
        name = f"{PROBE_PREFIX}{i}"
        answer = await answered(client, "PUT", segment_path(name))
        if answer.status_code not in (201, 409):
            raise RuntimeError(f"cannot create {name}: {answer.status_code} {answer.text}")
        info = (await answered(client, "GET", segment_path(name))).json()
        found.setdefault(int(info["container"]), name)
        i += 1
    return [found[c] for c in sorted(found)]
