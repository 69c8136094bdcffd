"""Leases that a cluster of nodes keeps beside its Tier 1: who is alive, and who owns what.

An interface that imports no implementation: membership decides *which* node should own a
container; a :class:`LeaseStore` only keeps the facts, each with a compare-and-set so that two
nodes can never both believe they took the same lease, and each expiring by itself when its
holder stops renewing it. JetStream keeps them in a key-value bucket
(:mod:`segmentstore.cluster.jetstream_leases`, over the JetStream connection and signed entries
that ``segmentstore.tier1`` provides: tier1 stays a leaf, knowing nothing of leases).

A lease is a claim, not the fence: a paused owner may still believe it holds one it lost.
What stops a stale owner from writing is the Tier 1 epoch (and the Tier 2 manifest epoch).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class ContainerLease:
    """``owner`` holds container ``container`` at Tier 1 epoch ``epoch`` (0 while it has
    not opened it yet); ``revision`` is what the next compare-and-set must name."""

    container: int
    owner: str
    epoch: int
    revision: int


@dataclass(frozen=True, slots=True)
class Membership:
    """One read of the leases: the live nodes (id -> advertised URL), the held container
    leases, and the containers whose lease was released on purpose (not merely expired).
    ``young``: the store was made less than a lease ago (first made, or made again after it
    was lost), so a live holder may not have written its lease in it yet. ``left``: the nodes
    whose last entry says they left on purpose (not merely stopped renewing)."""

    nodes: dict[str, str] = field(default_factory=dict)
    leases: dict[int, ContainerLease] = field(default_factory=dict)
    released: frozenset[int] = frozenset()
    young: bool = False
    left: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class BackendUsage:
    """What the deployment holds in the backend the leases live in, for metrics and drills:
    its streams and their consumers (both must stay flat), and its streams' replicas that are
    not in service now (offline, or behind their leader; a stream without a leader counts
    that one too): a quorum lost next is an outage."""

    streams: int
    consumers: int
    replicas_missing: int = 0


class LeaseStore(ABC):
    """Every method raises ``DataLogError`` leaves when the store cannot be reached; a
    compare-and-set that finds someone else's lease is an answer (None), not an error."""

    @property
    @abstractmethod
    def lease_ms(self) -> int:
        """How long a lease lives unrenewed (the store's own figure, which every node uses)."""

    @abstractmethod
    async def open(self) -> None: ...

    @abstractmethod
    async def close(self) -> None: ...

    @abstractmethod
    async def announce(self, node: str, url: str) -> None:
        """Register ``node`` as alive at ``url``, or renew it."""

    @abstractmethod
    async def withdraw(self, node: str) -> None:
        """``node`` leaves: the others stop counting it at once."""

    @abstractmethod
    async def read(self) -> Membership: ...

    @abstractmethod
    async def acquire(self, container: int, owner: str) -> ContainerLease | None:
        """Take the lease of ``container`` if nobody holds it; None if somebody does."""

    @abstractmethod
    async def renew(self, lease: ContainerLease, epoch: int) -> ContainerLease | None:
        """Renew ``lease`` (recording ``epoch``); None if it is no longer this holder's."""

    @abstractmethod
    async def release(self, lease: ContainerLease) -> None:
        """Give ``lease`` up, if it is still this holder's, so the next owner need not wait
        for it to expire."""

    def view_current(self) -> bool:
        """Whether :meth:`read` follows the store as it is now (a view pushed by a watcher
        may lag behind a store that was lost and made again)."""
        return True

    async def usage(self) -> BackendUsage | None:
        """What the deployment has in the backend the leases live in; None where there is
        no such thing."""
        return None
