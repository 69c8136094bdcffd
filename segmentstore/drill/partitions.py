"""Network partitions of a spawned cluster: links cut, black-holed, made one-way or slowed down
on the drill's switchboard (:mod:`.network`), held for longer than the lease, then healed.

The plans, one per partition fault (:mod:`segmentstore.drill.faults.partitions`), each drawn
by the seed (which node or server, how the link fails):

- ``jetstream_partition``: a node loses every JetStream server (refused or black hole), while
  clients and the other nodes still reach it. It can renew no lease, so within its lease it
  must stop serving its containers (requests for them answered ``503``), and the others must
  take them over; once healed it finds them taken and is fenced, as after a pause.
- ``node_partition``: a node loses every other node (refused or black hole) but not JetStream:
  it keeps its containers; requests forwarded to it or by it fail (``503``) until it heals.
- ``jetstream_isolation``: one JetStream server loses the other two (refused or black hole);
  the nodes still reach it, and those connected to it find a server without a quorum.
- ``one_way``: one direction of some links is held while the other passes: a node to every
  JetStream server, or back; a node to the other nodes, or back; a JetStream server to the
  others; the drill's client to a node, or back.
- ``delay``: every byte on some links arrives later (20 ms to half a lease, drawn): a node's
  links to JetStream, to the other nodes or to the client, or a JetStream server's routes.

Recovery is measured from the heal until the cluster has settled again with every node and a
probe append to every container succeeds. While the fault is held the drill also measures,
where it applies, how long the node that lost JetStream went on serving its containers
(``stopped_serving_s``, which must be within its lease) and how long the other nodes took to
serve every container without it (``takeover_s``).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from segmentstore.drill.network import CLIENT, DrillNetwork
from segmentstore.harness.store_nodes import StoreNode, StoreNodes, unsettled

CUT_MODES = ("refused", "black_hole")
_WATCH_EVERY_S = 0.1
_SEGMENTS = "/v1/segments/"
# Log lines by which a node says it gave a container up: somebody else has it, or may soon.
FENCING_LINES = (
    "lost the lease of container",
    "was fenced by a newer owner",
    "could not renew the lease of container",
)

Healed = Callable[[float], Awaitable[float | None]]  # since (monotonic) -> recovery s or None


@dataclass
class Held:
    """What holding a partition showed, and how long the cluster took to heal from it."""

    recovery_s: float | None
    note: str
    measures: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


@dataclass
class Plan:
    what: str  # for the report
    links: list[tuple[str, str, dict[str, Any]]]  # (a, b, link state)
    lost_jetstream: StoreNode | None = None  # a node that can renew no lease while it lasts
    expect_takeover: bool = False  # the others must serve its containers meanwhile


class Partitions:
    def __init__(self, network: DrillNetwork, nodes: StoreNodes, lease_ms: int) -> None:
        self._network = network
        self._nodes = nodes
        self._lease_s = lease_ms / 1000

    async def hold(
        self,
        kind: str,
        plan: Plan,
        rng: random.Random,
        hold_s: tuple[float, float],
        limit_s: float,
        probes: list[str],
        healed: Healed,
    ) -> Held:
        """Cut the links of ``plan``, hold them past the lease while watching the cluster,
        heal them, and wait for the cluster to settle."""
        victim = plan.lost_jetstream
        held_before = await asyncio.to_thread(self._held_by, victim) if victim else []
        fencing_before = fencing_lines(victim) if victim else 0
        hold = max(rng.uniform(*hold_s), self._lease_s * rng.uniform(1.5, 2.5))
        unidentified = (await asyncio.to_thread(self._network.stats))["unidentified"]
        cut = time.monotonic()
        for a, b, state in plan.links:
            await asyncio.to_thread(self._network.set, a, b, **state)
        measures: dict[str, Any] = {"held_s": None}
        problems: list[str] = []
        watch = None
        if victim is not None and held_before:
            watch = asyncio.create_task(_serving(victim, held_before, probes, cut))
        if plan.expect_takeover:
            assert victim is not None
            survivors = [n for n in self._nodes.live if n is not victim]
            took = await _taken_over(survivors, probes, cut, limit_s)
            measures["takeover_s"] = took
            if took is None:
                problems.append(f"{kind} ({plan.what}): the other nodes did not serve every"
                                f" container within {limit_s:.0f} s")  # fmt: skip
        await asyncio.sleep(max(0.0, cut + hold - time.monotonic()))
        if watch is not None:
            stopped = await _finish(watch)
            measures["stopped_serving_s"] = stopped
            problems += self._late(kind, plan, stopped, time.monotonic() - cut)
        unserved = await asyncio.to_thread(self._unserved)
        measures["unserved_at_heal"] = unserved
        await asyncio.to_thread(self._network.heal)
        healed_at = time.monotonic()
        stats = await asyncio.to_thread(self._network.stats)
        if stats["unidentified"] > unidentified:
            problems.append(f"{kind} ({plan.what}): {stats['unidentified'] - unidentified}"
                            " connections to a node came from no node the drill knows: the"
                            " partition may have missed them")  # fmt: skip
        measures["held_s"] = round(healed_at - cut, 2)
        recovery_s = await healed(healed_at)
        note = f"{plan.what}, held {healed_at - cut:.1f} s"
        if unserved:
            note += f"; containers {unserved} served by no node at the heal"
        if victim is not None:
            note += f"; it held containers {held_before}"
            if "stopped_serving_s" in measures:
                stopped = measures["stopped_serving_s"]
                note += "; served them until the heal" if stopped is None else (
                    f"; stopped serving them after {stopped:.2f} s"
                )  # fmt: skip
            if "takeover_s" in measures and measures["takeover_s"] is not None:
                note += f"; the others served all after {measures['takeover_s']:.2f} s"
            if recovery_s is not None:
                said = fencing_lines(victim) - fencing_before
                measures["fencings_logged"] = said
                note += f"; it logged {said} lost leases or fencings"
        return Held(recovery_s, note, measures, problems)

    def _late(self, kind: str, plan: Plan, stopped: float | None, held_s: float) -> list[str]:
        """The node that lost JetStream must stop serving within its lease: before the lease
        it renewed last (at most a tick before the cut) expires and another node may take the
        container (the drill's polling adds up to a tenth of a second)."""
        allowed = self._lease_s + _WATCH_EVERY_S
        if stopped is None and held_s > allowed:
            return [f"{kind} ({plan.what}): it still served containers it could not renew"
                    f" {held_s:.1f} s after the cut (lease {self._lease_s:.1f} s)"]  # fmt: skip
        if stopped is not None and stopped > allowed:
            return [f"{kind} ({plan.what}): it served containers it could not renew for"
                    f" {stopped:.1f} s after the cut (lease {self._lease_s:.1f} s)"]  # fmt: skip
        return []

    # -- what to break -----------------------------------------------------------------------

    def _pick(self, rng: random.Random) -> tuple[StoreNode, list[str], dict[str, Any]]:
        """A node, the other nodes, and how its links fail if cut."""
        node = rng.choice(self._nodes.live)
        others = [n for n in self._network.nodes if n != node.node_id]
        return node, others, {"mode": rng.choice(CUT_MODES)}

    def cut_from_jetstream(self, rng: random.Random) -> Plan:
        node, _, cut = self._pick(rng)
        links = [(node.node_id, js, cut) for js in self._network.jetstream]
        return Plan(f"{node.node_id} cut off from JetStream ({cut['mode']})", links, node, True)

    def cut_from_nodes(self, rng: random.Random) -> Plan:
        node, others, cut = self._pick(rng)
        what = f"{node.node_id} cut off from the other nodes ({cut['mode']})"
        return Plan(what, [(node.node_id, n, cut) for n in others])

    def isolate_jetstream_server(self, rng: random.Random) -> Plan:
        _, _, cut = self._pick(rng)
        jetstream = self._network.jetstream
        server = rng.choice(jetstream)
        links = [(server, js, cut) for js in jetstream if js != server]
        return Plan(f"JetStream {server} cut off from the other servers ({cut['mode']})", links)

    def one_way(self, rng: random.Random) -> Plan:
        node, others, _ = self._pick(rng)
        return self._one_way(rng, node, others)

    def delay(self, rng: random.Random) -> Plan:
        node, others, _ = self._pick(rng)
        return self._delay(rng, node, others)

    def _one_way(self, rng: random.Random, node: StoreNode, others: list[str]) -> Plan:
        net, x = self._network, node.node_id
        server = rng.choice(net.jetstream)
        variants = {
            f"{x} -> JetStream": ([(x, js) for js in net.jetstream], [x]),
            f"JetStream -> {x}": ([(x, js) for js in net.jetstream], net.jetstream),
            f"{x} -> the other nodes": ([(x, n) for n in others], [x]),
            f"the other nodes -> {x}": ([(x, n) for n in others], others),
            f"JetStream {server} -> the other servers": (
                [(server, js) for js in net.jetstream if js != server],
                [server],
            ),
            f"client -> {x}": ([(CLIENT, x)], [CLIENT]),
            f"{x} -> client": ([(CLIENT, x)], [x]),
        }
        what = rng.choice(sorted(variants))
        pairs, senders = variants[what]
        links = [(a, b, {"held_from": senders}) for a, b in pairs]
        plan = Plan(f"held one way: {what}", links)
        if what.endswith("-> JetStream") or what.startswith("JetStream ->"):
            # Either way it renews nothing; only when its requests are what is lost do the
            # others also see its node entry expire and take its containers at once.
            plan.lost_jetstream = node
            plan.expect_takeover = what.endswith("-> JetStream")
        return plan

    def _delay(self, rng: random.Random, node: StoreNode, others: list[str]) -> Plan:
        net, x = self._network, node.node_id
        delay_ms = round(math.exp(rng.uniform(math.log(20), math.log(self._lease_s * 500))))
        server = rng.choice(net.jetstream)
        variants = {
            f"{x} <-> JetStream": [(x, js) for js in net.jetstream],
            f"{x} <-> the other nodes": [(x, n) for n in others],
            f"JetStream {server} <-> the other servers": [
                (server, js) for js in net.jetstream if js != server
            ],
            f"client <-> {x}": [(CLIENT, x)],
        }
        what = rng.choice(sorted(variants))
        links = [(a, b, {"delay_ms": delay_ms}) for a, b in variants[what]]
        return Plan(f"{delay_ms} ms added each way: {what}", links)

    def _unserved(self) -> list[int]:
        """Containers no node says it serves, asking each directly (a node that does not
        answer serves nothing)."""
        served: set[int] = set()
        for node in self._nodes.live:
            with contextlib.suppress(httpx.HTTPError, ValueError, KeyError):
                served |= {c for c, owner in self._nodes.owners(node.url).items()
                           if owner == node.node_id}  # fmt: skip
        return sorted(set(range(self._nodes.containers)) - served)

    def _held_by(self, node: StoreNode) -> list[int]:
        owners = self._nodes.owners(node.url)
        return [c for c, owner in owners.items() if owner == node.node_id]


async def _serving(node: StoreNode, held: list[int], probes: list[str], cut: float) -> float:
    """Poll ``node`` directly (not through the switchboard) until it serves none of ``held``:
    its own view lists none of them as its own, and a read of their probe segments is no longer
    answered by the node itself. Seconds after ``cut`` that it was last seen serving one."""
    last_served = 0.0
    async with httpx.AsyncClient(base_url=node.url, timeout=2) as client:
        while True:
            now = time.monotonic()
            serving = False
            try:
                view = (await client.get("/v1/cluster")).json()
                mine = {c["id"] for c in view["containers"] if c["owner"] == node.node_id}
                serving = bool(mine & set(held))
                for container in held:
                    read = await client.get(
                        f"{_SEGMENTS}{probes[container]}:read",
                        params={"offset": 0, "max_length": 16},
                    )
                    # Forwarded to another owner (Segment-Owner) is not serving it here.
                    local = "segment-owner" not in read.headers
                    serving |= read.status_code in (200, 204) and local
            except (httpx.HTTPError, ValueError, KeyError):
                serving = True  # not known to have stopped
            if serving:
                last_served = now - cut
            else:
                return last_served
            await asyncio.sleep(_WATCH_EVERY_S)


async def _finish(watch: asyncio.Task[float]) -> float | None:
    """What the watch found, or None if the node still served when the fault was healed."""
    if watch.done():
        return watch.result()
    watch.cancel()
    await asyncio.gather(watch, return_exceptions=True)
    return None


async def _taken_over(
    survivors: list[StoreNode], probes: list[str], since: float, limit_s: float
) -> float | None:
    """Seconds until the survivors have settled among themselves and each of them appends to
    every container; None if not within ``limit_s``."""
    urls = {node.node_id: node.url for node in survivors}
    async with httpx.AsyncClient(timeout=5) as client:
        while time.monotonic() < since + limit_s:
            if await asyncio.to_thread(unsettled, urls) is None and await _appends(
                client, list(urls.values()), probes
            ):
                return round(time.monotonic() - since, 2)
            await asyncio.sleep(0.1)
    return None


async def _appends(client: httpx.AsyncClient, urls: list[str], probes: list[str]) -> bool:
    try:
        for i, probe in enumerate(probes):
            url = f"{urls[i % len(urls)]}{_SEGMENTS}{probe}:append"
            if (await client.post(url, content=b"probe")).status_code != 200:
                return False
    except httpx.HTTPError:
        return False
    return True


def fencing_lines(node: StoreNode) -> int:
    """How many times the node's log says it gave a container up to a newer owner."""
    try:
        log = (node.root / f"{node.node_id}.log").read_text(errors="replace")
    except FileNotFoundError:
        return 0
    return sum(log.count(line) for line in FENCING_LINES)
