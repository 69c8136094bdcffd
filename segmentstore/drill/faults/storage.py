"""Faults of storage, each held a while and then lifted: Tier 2 away, Tier 2 full, Tier 1 full."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from segmentstore.drill.faults.fault import Held


@runtime_checkable
class Tier2Outages(Protocol):
    async def tier2_outage(self, on: bool) -> None:
        """Begin (``on``) or end an outage of Tier 2."""


@runtime_checkable
class Tier2Fills(Protocol):
    async def tier2_full(self, on: bool) -> None:
        """Fill Tier 2's disk (``on``), or give it room again."""


@runtime_checkable
class Tier1Fills(Protocol):
    async def tier1_full(self, on: bool) -> None:
        """Fill the local Tier 1's disk (``on``), or give it room again."""


class Tier2Outage(Held):
    kind = "tier2_outage"
    description = (
        "Tier 2 goes away (S3's server stopped, a file Tier 2 made read-only); reads go on and"
        " no container stops"
    )
    shapes = frozenset({"node", "cluster"})
    tier2 = True

    async def inject(self) -> str:
        deployment = self.deployment
        assert isinstance(deployment, Tier2Outages), self.kind
        await deployment.tier2_outage(True)
        return ""

    async def heal(self) -> str:
        deployment = self.deployment
        assert isinstance(deployment, Tier2Outages), self.kind
        await deployment.tier2_outage(False)
        return ""


class Tier2Full(Held):
    kind = "tier2_full"
    description = "a file Tier 2's disk fills up; reads go on and no container stops"
    shapes = frozenset({"node"})
    tier2 = True

    async def inject(self) -> str:
        deployment = self.deployment
        assert isinstance(deployment, Tier2Fills), self.kind
        await deployment.tier2_full(True)
        return ""

    async def heal(self) -> str:
        deployment = self.deployment
        assert isinstance(deployment, Tier2Fills), self.kind
        await deployment.tier2_full(False)
        return ""


class Tier1Full(Held):
    kind = "tier1_full"
    description = "the local Tier 1's disk fills up: containers become read-only, reads go on"
    shapes = frozenset({"node"})

    async def inject(self) -> str:
        deployment = self.deployment
        assert isinstance(deployment, Tier1Fills), self.kind
        await deployment.tier1_full(True)
        return ""

    async def heal(self) -> str:
        deployment = self.deployment
        assert isinstance(deployment, Tier1Fills), self.kind
        await deployment.tier1_full(False)
        return ""
