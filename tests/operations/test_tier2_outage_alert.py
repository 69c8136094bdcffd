"""A real Prometheus scraping a real node through a Tier 2 outage that the drill injects: the
Tier 2 lag alert fires while the outage lasts and resolves once Tier 2 is back, with the node
still scraped; the drill then finds every acknowledged append intact.

The node is the drill's own spawned deployment with S3 on a moto server in this process (the
drill stops moto for the outage and starts it again on the same port); the load is the
drill's exactly-once writers and tail readers. Prometheus evaluates the project's alerts with
minutes read as seconds (``prometheus_server``), so ``for: 10m`` is 10 s here.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from pathlib import Path

import httpx
import pytest
from prometheus_server import JOB, PrometheusServer

from segmentstore.drill.deployment import SpawnedDeployment
from segmentstore.drill.faults import FaultContext, fault_class, find_probes
from segmentstore.drill.load import Load
from segmentstore.drill.verify import verify_all

pytestmark = [pytest.mark.integration, pytest.mark.s3, pytest.mark.slow]

LAG_ALERT = "SegmentStoreTier2LagGrowing"
FAILING_ALERT = "SegmentStoreTier2Failing"
# Long enough for the lag alert (a 5 s window against the 5 s before it, held for 10 s) to fire
# with room to spare on a loaded machine.
OUTAGE_S = 25.0


class WatchedDeployment(SpawnedDeployment):
    """The drill's deployment, noting when its Tier 2 fault begins and ends."""

    def __init__(self, tier2_kind: str, work_dir: Path) -> None:
        super().__init__(tier2_kind, work_dir)
        self.tier2_changes: list[tuple[bool, float]] = []

    async def tier2_outage(self, on: bool) -> None:
        await super().tier2_outage(on)
        self.tier2_changes.append((on, time.monotonic()))


class AlertTimeline:
    """Samples the states of some alerts every 200 ms in a thread, with the time of each."""

    def __init__(self, prometheus: PrometheusServer, names: tuple[str, ...]) -> None:
        self.samples: list[tuple[float, dict[str, str]]] = []
        self._prometheus = prometheus
        self._names = names
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="alert-timeline", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            states = {
                name: ",".join(sorted({a["state"] for a in self._prometheus.alerts(name)}))
                for name in self._names
            }
            self.samples.append((time.monotonic(), states))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def states(self, name: str, start: float, end: float) -> set[str]:
        """The states ``name`` was seen in between ``start`` and ``end``."""
        return {s[name] for t, s in self.samples if start <= t <= end}


async def test_a_tier2_outage_fires_the_lag_alert_which_resolves_after_it(
    prometheus: PrometheusServer, tmp_path_factory: pytest.TempPathFactory
) -> None:
    deployment = WatchedDeployment("s3", tmp_path_factory.mktemp("drill"))
    await deployment.start()
    try:
        async with httpx.AsyncClient(base_url=deployment.url, timeout=30) as client:
            names = [f"operations/outage-{i}" for i in range(8)]
            load = Load(client, names, writers=4, readers=1, payload_bytes=(256, 2048), seed=29)
            await load.create_segments()
            probes = await find_probes(client, containers=4)
            prometheus.set_targets([deployment.url])
            await asyncio.to_thread(prometheus.wait_scraped, 1)
            timeline = AlertTimeline(prometheus, (LAG_ALERT, FAILING_ALERT))
            load.start()
            try:
                await asyncio.sleep(4)  # steady load, scraped: Tier 2 keeps up
                context = FaultContext(
                    deployment, client, probes, random.Random(29), (OUTAGE_S, OUTAGE_S), 60, names
                )
                outcome = await fault_class("tier2_outage")(context).run()
                healed = time.monotonic()
                assert outcome.recovery_s is not None, outcome.note
                # Resolved while the node is still up and scraped, not by its series ending.
                await asyncio.to_thread(
                    prometheus.wait_for,
                    f"{LAG_ALERT} resolved after the outage",
                    lambda: timeline.samples[-1][1][LAG_ALERT] == "",
                    30,
                )
                assert prometheus.query(f'up{{job="{JOB}"}} == 1')
            finally:
                timeline.stop()
                await load.stop()
            verdict = await verify_all(load, client, 60)
    finally:
        prometheus.set_targets([])
        await deployment.close()

    (began_on, began), (lifted_on, lifted) = deployment.tier2_changes
    assert began_on and not lifted_on
    lag = [(t, states[LAG_ALERT]) for t, states in timeline.samples]
    fired = [t for t, state in lag if state == "firing" and began <= t <= lifted]
    assert fired, f"the lag alert did not fire during the outage: {lag}"
    assert all(state == "" for t, state in lag if t < began), "it fired before the outage"
    # Active until the outage ended (give or take a sample), then resolved, the node scraped.
    last_active = max(t for t, state in lag if state != "")
    assert last_active >= lifted - 1, f"resolved before the outage ended: {lag}"
    resolved_at = min(t for t, _ in lag if t > last_active)
    assert "firing" in timeline.states(FAILING_ALERT, began, lifted), timeline.samples
    print(
        f"outage of {lifted - began:.1f} s: the lag alert fired {fired[0] - began:.1f} s into it"
        f" and was resolved {resolved_at - lifted:.1f} s after it ended; the drill saw the store"
        f" healed and caught up {healed - lifted:.1f} s after it ended ({outcome.note})"
    )
    assert "caught up" in outcome.note, outcome.note
    assert verdict.lost == 0 and verdict.torn_bytes == 0, verdict.problems
    assert load.stats.acknowledged > 0
