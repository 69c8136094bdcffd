"""Faults of storage, each held a while and then lifted: Tier 2 away, Tier 2 full, Tier 1 full."""

from __future__ import annotations

from segmentstore.drill.faults.fault import Held


class Tier2Outage(Held):
    kind = "tier2_outage"
    description = (
        "Tier 2 goes away (S3's server stopped, a file Tier 2 made read-only); reads go on and"
        " no container stops"
    )
    shapes = frozenset({"node", "cluster"})
    tier2 = True

    async def inject(self) -> str:
        await self.deployment.tier2_outage(True)
        return ""

    async def heal(self) -> str:
        await self.deployment.tier2_outage(False)
        return ""


class Tier2Full(Held):
    kind = "tier2_full"
    description = "a file Tier 2's disk fills up; reads go on and no container stops"
    shapes = frozenset({"node"})
    tier2 = True

    async def inject(self) -> str:
        await self.deployment.tier2_full(True)
        return ""

    async def heal(self) -> str:
        await self.deployment.tier2_full(False)
        return ""


class Tier1Full(Held):
    kind = "tier1_full"
    description = "the local Tier 1's disk fills up: containers become read-only, reads go on"
    shapes = frozenset({"node"})

    async def inject(self) -> str:
        await self.deployment.tier1_full(True)
        return ""

    async def heal(self) -> str:
        await self.deployment.tier1_full(False)
        return ""
