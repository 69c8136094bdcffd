"""What a fault is given: the deployment, the drill's client and probes, its chances, and the
ways it can be measured from its start to the moment the store has healed.

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

A partition of a spawned cluster (:mod:`.partitions`) is measured from its heal until the
cluster has settled again with every node and appends succeed; what was seen while it was
held is in its note and measures.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import httpx

from segmentstore.drill.deployment import Deployment
from segmentstore.drill.load import answered, segment_path
from segmentstore.drill.partitions import Partitions

PROBE_PREFIX = "drill-probe/"
_STEADY_LAG_BYTES = 1 << 20


@runtime_checkable
class Cluster(Protocol):
    """What a spawned cluster adds to a deployment (see ``cluster_deployment``): each of its
    node faults broken by one method, mended by another; each returns what is worth noting."""

    def transport(self, limits: httpx.Limits, seed: int) -> httpx.AsyncBaseTransport:
        """Sends each request to a node that can answer now."""
        ...

    async def settled(self) -> bool: ...

    async def kill_node(self, rng: random.Random) -> str: ...

    async def stop_node(self, rng: random.Random) -> str: ...

    async def restart_node(self) -> str: ...

    async def pause_node(self, rng: random.Random) -> str: ...

    async def resume_node(self) -> str: ...

    def paused_node_said(self) -> str:
        """Once woken and settled: what the node that was paused logged on waking up."""
        ...

    async def kill_jetstream_server(self, rng: random.Random) -> str: ...

    async def restart_jetstream_server(self) -> str: ...

    def stale_acknowledgements(self, answered_by: dict[str, Any]) -> list[str]: ...

    # The partition faults of its network (None until it has started).
    partitions: Partitions | None


@dataclass
class Outcome:
    recovery_s: float | None
    note: str = ""
    measures: dict[str, Any] = field(default_factory=dict)  # a partition's, while it was held
    problems: list[str] = field(default_factory=list)


class NotInjected(Exception):
    """The fault could not be injected (the note says why); nothing was broken."""


Step = Callable[[], Awaitable[str]]  # a fault's step; what is worth noting about it


class FaultContext:
    def __init__(
        self,
        deployment: Deployment,
        client: httpx.AsyncClient,
        probes: list[str],
        rng: random.Random,
        hold_s: tuple[float, float],
        limit_s: float,
        segments: list[str] | None = None,
    ) -> None:
        self.deployment = deployment
        self.client = client
        self.probes = probes
        self.rng = rng
        self.hold_s = hold_s
        self.limit_s = limit_s
        self.segments = segments or probes
        self.cluster = deployment if isinstance(deployment, Cluster) else None

    # -- how a fault is measured ------------------------------------------------------------

    async def healing_by_itself(self, inject: Step) -> Outcome:
        """A fault the deployment heals from by itself (a kill, a restart, a power loss):
        recovery is measured from the moment it was injected."""
        started = time.monotonic()
        try:
            note = await inject()
        except NotInjected as why:
            return Outcome(None, str(why))
        outcome = await self.healed(started)
        outcome.note = f"{note}; {outcome.note}" if outcome.note and note else note or outcome.note
        return outcome

    async def held(self, inject: Step, heal: Step, tier2: bool) -> Outcome:
        """A fault held for a while (a full disk, an outage), then lifted: recovery is measured
        from the lift, and, for a Tier 2 fault, how long Tier 2 took to catch up."""
        await inject()
        try:
            note = await self._hold(tier2)
        finally:
            await heal()
        lifted = time.monotonic()
        lag_at_lift = await self._tier2_lag()
        outcome = await self.healed(lifted)
        outcome.note = note
        if tier2:
            outcome.note += await self._caught_up(lifted, lag_at_lift)
        return outcome

    async def broken_and_mended(self, break_: Step, mend: Step) -> Outcome:
        """Recovery is the time from the fault until the survivors hold every container and
        appends succeed, with the broken process still down; then it is mended, and must be
        back in the cluster within the same limit."""
        started = time.monotonic()
        hit = await break_()
        outcome = await self.healed(started)
        if outcome.recovery_s is not None:
            await asyncio.sleep(self.rng.uniform(*self.hold_s))  # the survivors serve
        mended = time.monotonic()
        note = await mend()
        back = await self.healed(mended)
        if outcome.recovery_s is None:
            hit += f" ({outcome.note} while it was down)"
        if back.recovery_s is None:
            return Outcome(None, f"{hit}: {note}, then not settled again: {back.note}")
        outcome.note = f"{hit}: {note}, settled again in {back.recovery_s:.2f} s"
        return outcome

    async def recovered(self, started: float) -> float | None:
        return (await self.healed(started)).recovery_s

    async def healed(self, started: float) -> Outcome:
        deadline = started + self.limit_s
        while time.monotonic() < deadline:
            if await self._all_serving():
                return Outcome(time.monotonic() - started)
            await asyncio.sleep(0.05)
        return Outcome(None, f"not healed within {self.limit_s:.0f} s")

    # -- what is seen meanwhile -------------------------------------------------------------

    async def _tier2_lag(self) -> int:
        try:
            answer = await self.client.get("/v1/containers", timeout=5)
            return sum(int(c["tier2_lag_bytes"]) for c in answer.json()["containers"])
        except (httpx.TransportError, ValueError, KeyError):
            return -1

    async def _caught_up(self, lifted: float, lag_at_lift: int) -> str:
        """How long Tier 2 took to get back to the lag of steady load (a flush interval's
        worth of appends): the backlog of the fault is written."""
        deadline = lifted + self.limit_s
        while time.monotonic() < deadline:
            lag = await self._tier2_lag()
            if 0 <= lag <= _STEADY_LAG_BYTES:
                took = time.monotonic() - lifted
                return f"; Tier 2 lag {lag_at_lift >> 10} KiB at lift, caught up in {took:.1f} s"
            await asyncio.sleep(0.2)
        return f"; Tier 2 had not caught up {self.limit_s:.0f} s after the fault"

    async def _hold(self, tier2: bool) -> str:
        """Hold the fault, looking at statuses and reads meanwhile; what was seen."""
        until = time.monotonic() + self.rng.uniform(*self.hold_s)
        statuses: set[str] = set()
        failed_reads = 0
        reads = 0
        peak_rss = 0
        while time.monotonic() < until:
            peak_rss = max(peak_rss, self.deployment.rss_bytes() or 0)
            try:
                answer = await self.client.get("/v1/containers")
                statuses |= {c["status"] for c in answer.json()["containers"]}
                name = self.rng.choice(self.segments)
                read = await self.client.get(
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
        if tier2 and statuses - {"running"}:
            note += " (a container stopped during a Tier 2 fault)"
        return note

    async def _all_serving(self) -> bool:
        if self.cluster is not None and not await self.cluster.settled():
            return False
        try:
            answer = await self.client.get("/v1/containers", timeout=5)
            if answer.status_code != 200:
                return False
            if any(c["status"] != "running" for c in answer.json()["containers"]):
                return False
            for probe in self.probes:
                appended = await self.client.post(
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
