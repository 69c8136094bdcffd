"""Faults of processes: a node killed, its Tier 1 tail torn, a container restarted, power lost."""

from __future__ import annotations

import random
from typing import Protocol, runtime_checkable

import httpx

from segmentstore.drill.faults.context import NotInjected, Outcome
from segmentstore.drill.faults.fault import Fault, HealsByItself


@runtime_checkable
class Kills(Protocol):
    async def kill(self, rng: random.Random) -> None:
        """SIGKILL the node (or one of them) and have it come back."""


@runtime_checkable
class TearsTail(Protocol):
    async def kill_tearing_tail(self, rng: random.Random) -> None:
        """Kill the node, tear its Tier 1 tail as a cut-short write would, start it again."""


@runtime_checkable
class LosesPower(Protocol):
    async def lose_power(self, rng: random.Random) -> str:
        """The node loses what its disks had not synced, and is started again; the note."""


@runtime_checkable
class LosesJetStreamPower(Protocol):
    async def lose_jetstream_power(self, rng: random.Random) -> str:
        """Every JetStream server loses what it had not synced, and is started again."""


class Kill(Fault):
    kind = "kill"
    description = (
        "a node is SIGKILLed and started again; in a cluster, the others take its containers"
        " over while it is down"
    )
    shapes = frozenset({"node", "cluster", "jetstream_node", "running"})

    async def inject(self) -> str:
        if self.context.cluster is not None:
            return await self.cluster.kill_node(self.context.rng)
        deployment = self.deployment
        assert isinstance(deployment, Kills), self.kind
        await deployment.kill(self.context.rng)
        return ""

    async def heal(self) -> str:
        return await self.cluster.restart_node()

    async def run(self) -> Outcome:
        if self.context.cluster is not None:
            return await self.context.broken_and_mended(self.inject, self.heal)
        return await self.context.healing_by_itself(self.inject)


class TornTail(HealsByItself):
    kind = "torn_tail"
    description = (
        "a node is SIGKILLed and a torn record left at the end of its Tier 1, as a write cut"
        " short would; then it is started again"
    )
    shapes = frozenset({"node"})

    async def inject(self) -> str:
        deployment = self.deployment
        assert isinstance(deployment, TearsTail), self.kind
        await deployment.kill_tearing_tail(self.context.rng)
        return ""


class ContainerRestart(HealsByItself):
    kind = "container_restart"
    description = "a container is stopped and recovered in place (POST /v1/containers/N:restart)"
    shapes = frozenset({"node", "cluster", "jetstream_node", "running"})

    async def inject(self) -> str:
        container = self.context.rng.randrange(len(self.context.probes))
        try:
            await self.context.client.post(f"/v1/containers/{container}:restart", timeout=120)
        except httpx.TransportError as error:
            raise NotInjected(f"restart request failed: {error!r}") from error
        return f"container {container}"


class PowerLoss(HealsByItself):
    kind = "power_loss"
    description = (
        "the node loses power: SIGKILL, and its disks lose what was not synced (lazyfs);"
        " then it is started again"
    )
    shapes = frozenset({"node"})

    async def inject(self) -> str:
        deployment = self.deployment
        assert isinstance(deployment, LosesPower), self.kind
        return await deployment.lose_power(self.context.rng)


class JetStreamPowerLoss(HealsByItself):
    kind = "jetstream_power_loss"
    description = (
        "all three JetStream servers lose power at once and what they had not synced; the"
        " node must recover its containers by itself"
    )
    shapes = frozenset({"jetstream_node"})

    async def inject(self) -> str:
        deployment = self.deployment
        assert isinstance(deployment, LosesJetStreamPower), self.kind
        return await deployment.lose_jetstream_power(self.context.rng)
