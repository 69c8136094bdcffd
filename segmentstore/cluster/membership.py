"""This node's part in the cluster: its liveness lease, and the containers it holds.

Every tick (an eighth of the lease) the service renews the node's own entry and every container
lease it holds, reads the whole membership, and moves towards the assignment of
:func:`~segmentstore.cluster.assignment.assign` over the live nodes:

* a container it should own and nobody holds, it takes (a compare-and-set) and recovers. A
  lease that was released, or that expired with its holder's node entry, is taken at once;
  one whose holder may still renew it (its node is alive, or JetStream was out of reach
  lately, so every lease may have expired at once) only when it is still free a tick later;
  in a bucket made again less than a lease ago, one that another node held last only once
  the bucket is a lease old (its holder, if alive, takes it back meanwhile);
* a container it holds that another live node should own, it hands over: it drains and stops
  it, then releases the lease;
* a tick that cannot write this node's own lease (the bucket out of reach, or lost and not
  made again yet) leaves the node not ready, and its map naming only what it serves itself,
  until a tick writes it again: a node that holds no lease cannot vouch for anyone's;
* a container whose lease it failed to renew (it expired and somebody took it), or whose
  Tier 1 or Tier 2 fenced it, it stops at once; so it does with every container whose lease
  it could not renew for :data:`_SELF_FENCE_LEASES` of a lease (JetStream out of reach, or
  this node cut off from it), before another node can take it: a node that lost its lease
  serves nothing of that container, not even reads from its cache. That is watched every half
  tick on its own, not between ticks: a tick can wait a whole JetStream timeout.

Ownership by lease is how the nodes share the work; it is not what keeps data safe. A paused
node may believe it holds a lease it lost; its next Tier 1 append and Tier 2 manifest write
are refused because the new owner's recovery raised the container's epoch.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Coroutine
from typing import Any

from segmentstore.cluster.assignment import assign
from segmentstore.cluster.leases import BackendUsage, ContainerLease, LeaseStore, Membership
from segmentstore.cluster.secret import ClusterSecret
from segmentstore.containers.failures import is_fenced
from segmentstore.containers.startup_wait import JETSTREAM_HINT, retry_while_starting
from segmentstore.containers.status import ContainerStatus
from segmentstore.contracts.errors import InvalidArgumentError
from segmentstore.settings import Settings
from segmentstore.store import SegmentStore
from segmentstore.tier1 import DataLogError

log = logging.getLogger(__name__)

# Renewals per lease: a lease survives a few lost ones, and a takeover waits at most one tick
# more than the lease.
_TICKS_PER_LEASE = 8
# A held lease not renewed for this part of a lease is given up (the container stopped) by
# its holder: the lease expires at the stream's leader a lease after its last renewal.
_SELF_FENCE_LEASES = 0.75
_USAGE_EVERY_TICKS = 16  # how often the deployment's JetStream consumers are counted (metrics)
_SERVING = (ContainerStatus.RUNNING, ContainerStatus.READ_ONLY)  # its log is open at its epoch


def _recent(since: float, tick_s: float) -> bool:
    """Within a few ticks of ``since`` (monotonic seconds)."""
    return time.monotonic() - since < 4 * tick_s


class ClusterMembership:
    def __init__(
        self,
        store: SegmentStore,
        leases: LeaseStore,
        node_id: str,
        url: str,
        secret: ClusterSecret,
    ) -> None:
        self.node_id = node_id
        self.url = url
        self.secret = secret
        self._store = store
        self._leases = leases
        self._count = store.settings.store.containers
        self._held: dict[int, ContainerLease] = {}
        self._renewed_at: dict[int, float] = {}  # container -> monotonic time of its last renewal
        self._ticks = 0
        self._free_since: dict[int, float] = {}
        self._last_holder: dict[int, str] = {}  # the last node seen holding each container
        # node -> (URL, wall-clock ms) of every node seen alive since this one started and not
        # seen leaving: one that is no longer alive is missing (dead, or cut off), not gone
        self._seen: dict[str, tuple[str, int]] = {}
        # container -> times this node took it over from another node and recovered it
        self.takeovers: dict[int, int] = {}
        self._busy: dict[int, asyncio.Task[None]] = {}  # container -> take or hand-over
        self._task: asyncio.Task[None] | None = None
        self._watch: asyncio.Task[None] | None = None  # gives up what was not renewed in time
        self._stop = asyncio.Event()
        self._leaving = False
        self._unreachable_logged = False
        self._unreachable_at = -1e9  # when a tick last failed to reach the leases
        self.view = Membership()  # the last read, with this node's own changes since
        self.moves = {"taken": 0, "handed_over": 0, "lost": 0}  # for /metrics
        # The deployment's streams, consumers and missing replicas in JetStream, as last
        # counted, for /metrics
        self.jetstream_usage: BackendUsage | None = None
        self.joined = False
        # Whether the last tick wrote this node's lease and renewed the containers' (else it
        # holds no lease it can vouch for, and neither can it for anyone else's).
        self.leases_held = False
        self._held_at = -1e9  # monotonic time of the last tick that wrote the leases

    @property
    def container_count(self) -> int:
        return self._count

    @property
    def tick_s(self) -> float:
        return self._leases.lease_ms / 1000 / _TICKS_PER_LEASE

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Join: open the leases and announce this node. Containers follow from the first
        tick on, in the background."""
        patience_s = self._store.settings.store.startup_wait_ms / 1000

        async def join() -> None:
            try:
                await self._leases.open()
                await self._leases.announce(self.node_id, self.url)
            except DataLogError:
                await self._leases.close()
                raise

        def gave_up(error: BaseException) -> InvalidArgumentError:
            return InvalidArgumentError(
                f"cannot join the cluster within {patience_s:g} s: {error}: {JETSTREAM_HINT}"
            )

        await retry_while_starting(
            join,
            transient=(DataLogError,),
            patience_s=patience_s,
            not_yet="cannot join the cluster yet",
            gave_up=gave_up,
        )
        log.info(
            "node %s joined the cluster at %s (leases of %d ms)",
            self.node_id, self.url, self._leases.lease_ms,
        )  # fmt: skip
        loop = asyncio.get_running_loop()
        self._task = loop.create_task(self._run(), name="cluster")
        self._watch = loop.create_task(self._watch_renewals(), name="cluster renewals")

    async def leave(self) -> None:
        """Hand every container over and leave (a graceful stop): the others stop counting
        this node at once and take its released leases without waiting for them to expire."""
        if self._leaving:
            return
        self._leaving = True
        log.info("node %s leaving the cluster: handing over %d containers",
                 self.node_id, len(self._held))  # fmt: skip
        with contextlib.suppress(DataLogError):
            await self._leases.withdraw(self.node_id)
        await asyncio.gather(*self._busy.values(), return_exceptions=True)
        await asyncio.gather(*(self._hand_over(c) for c in list(self._held)))
        self._stop.set()
        running = [t for t in (self._task, self._watch) if t is not None]
        if running:
            await asyncio.wait(running)
        await self._leases.close()

    async def _watch_renewals(self) -> None:
        """Give up what could not be renewed in time even while a tick waits: a call to a
        JetStream server that does not answer takes its whole timeout, which can be longer
        than what is left of a lease (the tick alone would look only after it)."""
        while not self._stop.is_set():
            self._give_up_unrenewed()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), self.tick_s / 2)

    async def _run(self) -> None:
        while not self._stop.is_set():
            try:
                await self._tick()
            except DataLogError as error:
                self._unreachable_at = time.monotonic()
                self.leases_held = False
                if not self._unreachable_logged:
                    log.warning("cannot reach the cluster's leases (retrying): %s", error)
                    self._unreachable_logged = True
            except Exception:  # a bug: logged, and the next tick tries again
                log.exception("cluster tick failed")
            else:
                if self._unreachable_logged:
                    log.info("the cluster's leases are within reach again")
                self._unreachable_logged = False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), self.tick_s)

    # -- one tick ----------------------------------------------------------------------------

    async def _tick(self) -> None:
        if self._leaving:
            return
        await self._leases.announce(self.node_id, self.url)
        await self._renew_held()
        view = await self._leases.read()
        before, self.view = self.view, view
        self.joined = True
        self.leases_held = True
        self._held_at = time.monotonic()
        if not self._leases.view_current():
            return  # the bucket was made again and is not watched yet: decide nothing on it
        held = {c: lease.owner for c, lease in view.leases.items()}
        self._last_holder.update(held)
        now_ms = int(time.time() * 1000)
        self._seen.update((node, (url, now_ms)) for node, url in view.nodes.items())
        for node in view.left:
            self._seen.pop(node, None)
        held.update((c, self.node_id) for c in self._held)
        wanted = assign(self._count, {*view.nodes, self.node_id}, held)
        now = time.monotonic()
        for container in range(self._count):
            if container in self._busy or self._leaving:
                continue
            owner = wanted.get(container)
            if container in self._held:
                if owner != self.node_id and owner in view.nodes:
                    self._begin(container, self._hand_over(container))
            elif owner == self.node_id:
                await self._maybe_take(container, view, before, now)
        self._ticks += 1
        if self._ticks % _USAGE_EVERY_TICKS == 1:
            await self._count_usage()

    async def _count_usage(self) -> None:
        """Count the deployment's JetStream streams and consumers, for /metrics; a failure
        (JetStream busy, or a user not allowed to list streams) only leaves the figure old."""
        try:
            self.jetstream_usage = await self._leases.usage()
        except DataLogError as error:
            log.debug("cannot count the deployment's JetStream consumers: %s", error)

    async def _renew_held(self) -> None:
        for container, lease in list(self._held.items()):
            if container not in self._held:
                continue  # handed over meanwhile
            state = self._store.container(container)
            if is_fenced(state.failure_error):
                log.warning("container %d was fenced by a newer owner: giving it up", container)
                self._begin(container, self._give_up(container, release=True))
                continue
            renewed = await self._leases.renew(lease, state.epoch)
            if renewed is None:
                log.warning("lost the lease of container %d: stopping it", container)
                self._begin(container, self._give_up(container, release=False))
            elif container in self._held:
                self._held[container] = renewed
                self._renewed_at[container] = time.monotonic()

    def _give_up_unrenewed(self) -> None:
        """Stop every container whose lease this node could not renew lately: its lease is
        about to expire, and another node to take it."""
        limit_s = self._leases.lease_ms / 1000 * _SELF_FENCE_LEASES
        now = time.monotonic()
        for container in list(self._held):
            if container in self._busy:
                continue
            if now - self._renewed_at.get(container, now) > limit_s:
                log.warning(
                    "could not renew the lease of container %d for %.1f s: stopping it before"
                    " another node takes it",
                    container, now - self._renewed_at[container],
                )  # fmt: skip
                self._begin(container, self._give_up(container, release=False))

    async def _maybe_take(
        self, container: int, view: Membership, before: Membership, now: float
    ) -> None:
        found = view.leases.get(container)
        if found is not None:
            self._free_since.pop(container, None)
            if found.owner == self.node_id:
                # Held under this node's id by a process that is gone (this node, restarted
                # before its leases expired): take it back at once rather than wait.
                adopted = await self._leases.renew(found, found.epoch)
                if adopted is not None:
                    self._start_taking(container, adopted)
            return
        # The bucket was made again lately: its last holder may not have written the lease in
        # it yet, even once its node entry is there (a tick writes that first, then takes each
        # lease back, a few JetStream calls each, which a busy machine makes slow). A live
        # holder has a lease's time to do it; a dead one's are taken once the bucket is a
        # lease old.
        if (
            view.young
            and container not in view.released
            and self._last_holder.get(container, self.node_id) != self.node_id
        ):
            return
        if container not in view.released and self._may_come_back(container, view, before):
            # Merely expired: its holder may be about to take it back (see the module doc).
            first = self._free_since.setdefault(container, now)
            if now - first < self.tick_s * 0.9:
                return
        lease = await self._leases.acquire(container, self.node_id)
        self._free_since.pop(container, None)
        if lease is not None:
            self._start_taking(container, lease)

    def _start_taking(self, container: int, lease: ContainerLease) -> None:
        self._held[container] = lease
        self._renewed_at[container] = time.monotonic()
        self.moves["taken"] += 1
        if self._last_holder.get(container, self.node_id) != self.node_id:
            self.takeovers[container] = self.takeovers.get(container, 0) + 1  # from another node
        log.info("took the lease of container %d: recovering it", container)
        self._begin(container, self._take(container))

    def _may_come_back(self, container: int, view: Membership, before: Membership) -> bool:
        """Whether the holder of a lease that expired may still renew it: it is alive (its
        node entry is there), or JetStream was out of reach lately (every lease may have
        expired at once, its holders' included), or nobody was seen holding it (a cluster
        starting: the nodes starting with this one get a tick to show up)."""
        previous = before.leases.get(container)
        if previous is None:
            return True
        return previous.owner in view.nodes or _recent(self._unreachable_at, self.tick_s)

    # -- containers moving -------------------------------------------------------------------

    def _begin(self, container: int, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work, name=f"cluster container {container}")
        self._busy[container] = task
        task.add_done_callback(lambda _: self._busy.pop(container, None))

    async def _take(self, container: int) -> None:
        taken = await self._store.take_container(container)
        if taken.status is ContainerStatus.RUNNING:
            log.info("serving container %d at epoch %d", container, taken.epoch)

    async def _hand_over(self, container: int) -> None:
        log.info("handing container %d over", container)
        await self._give_up(container, release=True)

    async def _give_up(self, container: int, *, release: bool) -> None:
        lease = self._held.pop(container, None)
        self._renewed_at.pop(container, None)
        self.moves["handed_over" if release else "lost"] += 1
        await self._store.release_container(container)
        if release and lease is not None:
            with contextlib.suppress(DataLogError):
                await self._leases.release(lease)

    # -- what routing reads ------------------------------------------------------------------

    @property
    def leaving(self) -> bool:
        return self._leaving

    def serves(self, container: int) -> bool:
        return container in self._held

    def owner(self, container: int) -> tuple[str, str] | None:
        """(node id, URL) of the node that holds ``container``, as last seen; None if
        nobody does."""
        if container in self._held:
            return self.node_id, self.url
        lease = self.view.leases.get(container)
        if lease is None or lease.owner == self.node_id:
            return None
        url = self.view.nodes.get(lease.owner)
        return None if url is None else (lease.owner, url)

    def sees_the_cluster(self) -> bool:
        """Whether this node holds its own lease now (its last tick, less than half a lease
        ago, wrote it) and sees the others' as they are."""
        recent = time.monotonic() - self._held_at < self._leases.lease_ms / 2000
        return self.leases_held and recent and self._leases.view_current()

    def ready(self) -> bool:
        """Joined, holding its own lease, seeing the others', and serving reads of every
        container it holds (running, or read-only with Tier 1 full)."""
        if not self.joined or self._leaving or not self.sees_the_cluster():
            return False
        return all(self._store.container(c).status in _SERVING for c in self._held)

    def describe(self) -> dict[str, Any]:
        """``GET /v1/cluster``: the nodes with their containers, container -> owner, and the
        nodes seen alive since this one started that are no longer (``missing``: dead or
        cut off; a node that left on purpose is forgotten). A node that cannot vouch for the
        leases (:meth:`sees_the_cluster`) names only itself and what it serves."""
        seen = self.sees_the_cluster()
        containers = []
        for container in range(self._count):
            owner, epoch = None, None
            if container in self._held:
                # Until it has recovered, its epoch is not known yet (the log is opened at a
                # new one): an old number here would read as an owner fenced out.
                state = self._store.container(container)
                owner = self.node_id
                epoch = state.epoch if state.status in _SERVING else None
            elif seen:
                lease = self.view.leases.get(container)
                if lease is not None and lease.owner != self.node_id:
                    owner, epoch = lease.owner, lease.epoch
            containers.append({"id": container, "owner": owner, "epoch": epoch})
        nodes = dict(self.view.nodes) if seen else {}
        if not self._leaving:
            nodes[self.node_id] = self.url
        missing = [
            {"id": node, "url": url, "last_seen_ms": at}
            for node, (url, at) in sorted(self._seen.items())
            if seen and node not in nodes and node != self.node_id
        ]
        return {
            "node": self.node_id,
            "leases_held": seen,
            "missing": missing,
            "nodes": [
                {
                    "id": node,
                    "url": url,
                    "containers": [c["id"] for c in containers if c["owner"] == node],
                }
                for node, url in sorted(nodes.items())
            ],
            "containers": containers,
        }


def on_jetstream(store: SegmentStore, settings: Settings) -> ClusterMembership:
    """This node's membership, its leases kept beside its JetStream Tier 1."""
    from segmentstore.cluster.jetstream_leases import JetStreamLeases

    cluster = settings.cluster
    secret = ClusterSecret(cluster.secret_bytes())
    leases = JetStreamLeases(settings.tier1.jetstream, cluster.lease_ms, secret.leases)
    return ClusterMembership(store, leases, cluster.node_id, cluster.advertise_url, secret)
