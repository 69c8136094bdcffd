"""``segmentstore bench cluster``: cluster mode's three figures, each against its baseline.

1. **Takeover.** Three nodes over a three-node JetStream cluster; one node at a time is
   SIGKILLed and the time until every container is held by a live node and every live node is
   ready is measured (the lease is ``--lease-ms``); the node is restarted and the cluster
   settles before the next kill. Reported: p50 and max over ``--kills``.
2. **Forwarding.** The same appends sent to a segment's owner and to a node that forwards them
   (one at a time for latency, ``--tasks`` at once for throughput): the forwarded / direct ratio.
3. **A second node.** Appends/s through the client (which sends to owners) with one node, then
   with two: does a second process use the second core?

Everything, JetStream included, shares this machine, so these are loopback figures.
"""

from __future__ import annotations

import asyncio
import shutil
import statistics
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from segmentstore.bench.report import percentile, print_table, write_json
from segmentstore.client import AsyncSegmentStoreClient
from segmentstore.contracts.mapping import container_of
from segmentstore.harness.jetstream_cluster import JetStreamCluster
from segmentstore.harness.store_nodes import StoreNodes

CONTAINERS = 8
RECORD = b"x" * 1024


def run(
    kills: int,
    seconds: float,
    tasks: int,
    lease_ms: int,
    directory: str | None,
    json_path: str | None,
    parent_env: Mapping[str, str],
) -> list[dict[str, Any]]:
    base = Path(tempfile.mkdtemp(prefix="bench-cluster-", dir=directory))
    rows: list[dict[str, Any]] = []
    env = {"SEGMENTSTORE_CLUSTER__LEASE_MS": str(lease_ms)}
    try:
        print("... starting a three-node JetStream cluster on loopback", flush=True)
        with JetStreamCluster.running(base / "jetstream") as jetstream:
            tier2 = (base / "tier2").as_uri()
            nodes = StoreNodes(
                base / "a",
                jetstream.servers,
                tier2,
                prefix="a",
                containers=CONTAINERS,
                env=env,
                parent_env=parent_env,
            )
            try:
                rows += _takeover(nodes, kills)
                rows += asyncio.run(_forwarding(nodes, seconds, tasks))
            finally:
                nodes.stop()
            nodes = StoreNodes(
                base / "b",
                jetstream.servers,
                tier2,
                prefix="b",
                containers=CONTAINERS,
                env=env,
                parent_env=parent_env,
            )
            try:
                rows += _second_node(nodes, seconds, tasks)
            finally:
                nodes.stop()
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print_table(
        rows,
        [
            ("case", "case", "s"),
            ("figure", "figure", ".3f"),
            ("unit", "unit", "s"),
            ("baseline", "baseline", ".3f"),
            ("ratio", "ratio", ".2f"),
        ],
    )
    write_json(json_path, "cluster", rows)
    return rows


def _takeover(nodes: StoreNodes, kills: int) -> list[dict[str, Any]]:
    for _ in range(3):
        nodes.add()
    print(f"... three nodes settled in {nodes.wait_settled():.1f} s", flush=True)
    times: list[float] = []
    for kill in range(kills):
        victim = list(nodes.nodes.values())[kill % 3]
        held = sum(1 for owner in nodes.owners().values() if owner == victim.node_id)
        killed = time.monotonic()
        victim.sigkill()
        nodes.wait_settled()
        times.append(time.monotonic() - killed)
        print(f"... kill {kill + 1}/{kills}: {victim.node_id} ({held} containers) taken over"
              f" in {times[-1]:.2f} s", flush=True)  # fmt: skip
        nodes.add(victim.node_id)
        nodes.wait_settled()
    times.sort()
    p50, worst = statistics.median(times), times[-1]
    lease_s = float(nodes.env.get("SEGMENTSTORE_CLUSTER__LEASE_MS", "5000")) / 1000
    return [
        _row("takeover p50 (vs the lease)", p50, "s", lease_s),
        _row("takeover max (vs the lease)", worst, "s", lease_s),
    ]


async def _forwarding(nodes: StoreNodes, seconds: float, tasks: int) -> list[dict[str, Any]]:
    owners = nodes.owners()
    name = "bench/forwarded"
    owner_id = owners[container_of(name, CONTAINERS)]
    owner = next(n for n in nodes.live if n.node_id == owner_id)
    other = next(n for n in nodes.live if n.node_id != owner_id)
    direct = AsyncSegmentStoreClient(owner.url, route_to_owners=False)
    forwarded = AsyncSegmentStoreClient(other.url, route_to_owners=False)
    rows = []
    try:
        await direct.create_segment(name)
        print("... appends to the owner vs through another node", flush=True)
        latency = {k: await _latencies(c, name, seconds) for k, c in _pair(direct, forwarded)}
        case = "forwarded append p50 latency (vs to the owner)"
        rows.append(_row(case, latency["forwarded"], "ms", latency["direct"]))
        rate = {k: await _rate(c, [name], seconds, tasks) for k, c in _pair(direct, forwarded)}
        case = f"forwarded appends/s, {tasks} tasks (vs to the owner)"
        rows.append(_row(case, rate["forwarded"], "1/s", rate["direct"]))
    finally:
        await direct.aclose()
        await forwarded.aclose()
    return rows


def _second_node(nodes: StoreNodes, seconds: float, tasks: int) -> list[dict[str, Any]]:
    names = [f"bench/scale/{i}" for i in range(2 * CONTAINERS)]
    nodes.add()
    nodes.wait_settled()
    print("... appends/s with one node", flush=True)
    one = asyncio.run(_rate_via(nodes.live[0].url, names, seconds, tasks, create=True))
    nodes.add()
    nodes.wait_settled()
    print("... appends/s with two nodes", flush=True)
    two = asyncio.run(_rate_via(nodes.live[0].url, names, seconds, tasks, create=False))
    return [_row(f"appends/s, 2 nodes, {tasks} tasks (vs 1 node)", two, "1/s", one)]


def _pair(direct: Any, forwarded: Any) -> list[tuple[str, Any]]:
    return [("direct", direct), ("forwarded", forwarded)]


async def _latencies(client: AsyncSegmentStoreClient, name: str, seconds: float) -> float:
    samples: list[float] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        started = time.perf_counter()
        await client.append(name, RECORD)
        samples.append((time.perf_counter() - started) * 1000)
    samples.sort()
    return percentile(samples, 0.5)


async def _rate(
    client: AsyncSegmentStoreClient, names: list[str], seconds: float, tasks: int
) -> float:
    done = 0
    deadline = time.monotonic() + seconds

    async def one(task: int) -> None:
        nonlocal done
        name = names[task % len(names)]
        while time.monotonic() < deadline:
            await client.append(name, RECORD)
            done += 1

    started = time.monotonic()
    await asyncio.gather(*(one(t) for t in range(tasks)))
    return done / (time.monotonic() - started)


async def _rate_via(url: str, names: list[str], seconds: float, tasks: int, create: bool) -> float:
    async with AsyncSegmentStoreClient(url) as client:
        if create:
            for name in names:
                await client.create_segment(name)
        await _rate(client, names, 1.0, tasks)  # warm: connections, the owner map
        return await _rate(client, names, seconds, tasks)


def _row(case: str, figure: float, unit: str, baseline: float) -> dict[str, Any]:
    return {
        "case": case,
        "figure": figure,
        "unit": unit,
        "baseline": baseline,
        "ratio": figure / baseline if baseline else float("nan"),
    }
