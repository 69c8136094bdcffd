"""Faults of a spawned cluster's processes, each broken and, once the others have healed,
mended: a node paused or stopped gracefully, a JetStream server killed (a node's kill is
:class:`.processes.Kill`)."""

from __future__ import annotations

from segmentstore.drill.faults.context import Outcome
from segmentstore.drill.faults.fault import BrokenAndMended


class NodePause(BrokenAndMended):
    kind = "node_pause"
    description = (
        "a node is SIGSTOPped until its containers are taken over, then woken: it must find"
        " itself fenced and rejoin"
    )
    shapes = frozenset({"cluster"})

    async def inject(self) -> str:
        return await self.cluster.pause_node(self.context.rng)

    async def heal(self) -> str:
        return await self.cluster.resume_node()

    async def run(self) -> Outcome:
        # What it logged on waking is known only once it has settled again.
        outcome = await self.context.broken_and_mended(self.inject, self.heal)
        if outcome.recovery_s is not None:
            outcome.note += self.cluster.paused_node_said()
        return outcome


class NodeLeave(BrokenAndMended):
    kind = "node_leave"
    description = "a node stops gracefully (SIGTERM), handing its containers over; then rejoins"
    shapes = frozenset({"cluster"})

    async def inject(self) -> str:
        return await self.cluster.stop_node(self.context.rng)

    async def heal(self) -> str:
        return await self.cluster.restart_node()


class JetStreamKill(BrokenAndMended):
    kind = "jetstream_kill"
    description = "a JetStream server is SIGKILLed (its streams elect new leaders); then restarted"
    shapes = frozenset({"cluster"})

    async def inject(self) -> str:
        return await self.cluster.kill_jetstream_server(self.context.rng)

    async def heal(self) -> str:
        return await self.cluster.restart_jetstream_server()
