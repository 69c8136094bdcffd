"""A fault the drill injects: one class per kind, found by its kind in the registry
(:mod:`segmentstore.drill.faults`).

A fault says what it is (:meth:`Fault.describe`) and which deployments have it
(:attr:`Fault.shapes`); its family says the shape of its life and how its recovery is
measured (:class:`.context.FaultContext`): healing by itself, held then lifted, broken then
mended, each with what it breaks (``inject``) and how that is undone (``heal``), or a
partition's plan. Each calls the deployment's own method for its effect, so a kind can only
ever do what its class says.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

from segmentstore.drill.deployment import Deployment
from segmentstore.drill.faults.context import Cluster, FaultContext, Outcome

# The deployments a drill can run against (``Deployment.shape``), as the reasons name them.
SHAPES = {
    "node": "a spawned node (--spawn)",
    "cluster": "a spawned cluster (--nodes N)",
    "jetstream_node": "a spawned node over JetStream (--tier1 jetstream)",
    "running": "a running deployment (--url)",
}


class Fault(ABC):
    kind: ClassVar[str]
    description: ClassVar[str]  # what it does, in a line: for --help and the docs
    shapes: ClassVar[frozenset[str]]  # the deployments that have it (keys of SHAPES)

    def __init__(self, context: FaultContext) -> None:
        self.context = context

    @classmethod
    def describe(cls) -> str:
        return f"{cls.kind}: {cls.description}"

    @classmethod
    def unavailable(cls, deployment: Deployment) -> str | None:
        """Why ``deployment`` cannot have this fault; None if it can."""
        if deployment.shape not in cls.shapes:
            return "only " + " or ".join(SHAPES[s] for s in sorted(cls.shapes)) + " has it"
        return deployment.unavailable.get(cls.kind)

    @property
    def deployment(self) -> Deployment:
        return self.context.deployment

    @property
    def cluster(self) -> Cluster:
        assert self.context.cluster is not None, f"{self.kind} is a cluster's fault"
        return self.context.cluster

    @abstractmethod
    async def run(self) -> Outcome:
        """Inject the fault, see it healed, and measure the recovery."""


class HealsByItself(Fault):
    """Injected at once; the deployment brings back what it broke (a kill, a restart)."""

    @abstractmethod
    async def inject(self) -> str:
        """Break what this fault breaks; what was hit (for the note)."""

    async def run(self) -> Outcome:
        return await self.context.healing_by_itself(self.inject)


class Held(Fault):
    """Held while the drill looks at what the store does meanwhile, then lifted."""

    tier2: ClassVar[bool] = False  # a Tier 2 fault: no container may stop meanwhile

    @abstractmethod
    async def inject(self) -> str:
        """Begin the fault."""

    @abstractmethod
    async def heal(self) -> str:
        """Lift it."""

    async def run(self) -> Outcome:
        return await self.context.held(self.inject, self.heal, self.tier2)


class BrokenAndMended(Fault):
    """A cluster's process broken; once the others have healed without it, mended."""

    @abstractmethod
    async def inject(self) -> str:
        """Break it; what was hit."""

    @abstractmethod
    async def heal(self) -> str:
        """Mend it; what is worth noting."""

    async def run(self) -> Outcome:
        return await self.context.broken_and_mended(self.inject, self.heal)
