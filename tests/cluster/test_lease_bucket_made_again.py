"""Whom a lease bucket made again leaves a container to: its last holder, for a lease, even
once the holder has written its node entry in the new bucket (a tick writes that first, then
takes each of its leases back, and a busy machine makes those calls slow)."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

from segmentstore.cluster.leases import ContainerLease, LeaseStore, Membership
from segmentstore.cluster.membership import ClusterMembership

LEASE_MS = 5000


class _Leases(LeaseStore):
    """Takes every acquire it is asked for, and remembers them."""

    def __init__(self) -> None:
        self.acquired: list[int] = []

    @property
    def lease_ms(self) -> int:
        return LEASE_MS

    async def acquire(self, container: int, owner: str) -> ContainerLease | None:
        self.acquired.append(container)
        return None  # somebody else was quicker: nothing starts

    async def open(self) -> None: ...
    async def close(self) -> None: ...
    async def announce(self, node: str, url: str) -> None: ...
    async def withdraw(self, node: str) -> None: ...
    async def read(self) -> Membership:
        return Membership()

    async def renew(self, lease: ContainerLease, epoch: int) -> ContainerLease | None:
        return None

    async def release(self, lease: ContainerLease) -> None: ...


def _membership(leases: _Leases) -> ClusterMembership:
    store: Any = SimpleNamespace(settings=SimpleNamespace(store=SimpleNamespace(containers=4)))
    return ClusterMembership(store, leases, "n1", "http://127.0.0.1:1", secret=None)  # type: ignore[arg-type]


async def _taken(last_holder: str, *, young: bool) -> list[int]:
    """What this node (n1) acquires of container 0, free now, that ``last_holder`` held, in
    two looks a whole tick apart (as two of its ticks make), the holder's node entry written."""
    leases = _Leases()
    membership = _membership(leases)
    membership._last_holder[0] = last_holder
    nodes = {last_holder: "http://holder"}
    before = Membership(nodes=nodes, leases={0: ContainerLease(0, last_holder, 3, 9)})
    view = Membership(nodes=nodes, young=young)
    now = time.monotonic()
    await membership._maybe_take(0, view, before, now)
    await membership._maybe_take(0, view, before, now + membership.tick_s)
    return leases.acquired


async def test_a_young_bucket_leaves_a_lease_to_its_live_holder() -> None:
    # n2 wrote its node entry in the new bucket, not yet its lease of container 0.
    assert await _taken("n2", young=True) == []


async def test_once_the_bucket_is_a_lease_old_a_free_lease_is_taken_a_tick_later() -> None:
    assert await _taken("n2", young=False) == [0]


async def test_a_young_bucket_does_not_hold_back_a_lease_this_node_held_last() -> None:
    assert await _taken("n1", young=True) == [0]
