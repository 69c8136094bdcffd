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

import httpx
import pytest
from prometheus_server import JOB, PrometheusServer

from segmentstore.drill.deployment import SpawnedDeployment
from segmentstore.drill.faults import FaultInjector, find_probes
from segmentstore.drill.load import Load
from segmentstore.drill.verify import verify_all

pytestmark = [pytest.mark.integration, pytest.mark.s3, pytest.mark.slow]

LAG_ALERT = "SegmentStoreTier2LagGrowing"
FAILING_ALERT = "SegmentStoreTier2Failing"
# Long enough for the lag alert (a 5 s window against the 5 s before it, held for 10 s) to fire
# with room to spare on a loaded machine.
OUTAGE_S = 30.0


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
        return {s[name] for t, s in self.samples if start <= t <= end}


async def test_a_tier2_outage_fires_the_lag_alert_which_resolves_after_it(
    prometheus: PrometheusServer, tmp_path_factory: pytest.TempPathFactory
) -> None:
    deployment = SpawnedDeployment("s3", work_dir=tmp_path_factory.mktemp("drill"))
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
                before = time.monotonic()
                injector = FaultInjector(
                    deployment, client, probes, random.Random(29), (OUTAGE_S, OUTAGE_S), 60
                )
                outcome = await injector.inject("tier2_outage", names)
                healed = time.monotonic()
                assert outcome.recovery_s is not None, outcome.note
                # Resolved while the node is still up and scraped, not by its series ending.
                await asyncio.to_thread(
                    prometheus.wait_for,
                    f"{LAG_ALERT} resolved after the outage",
                    lambda: not prometheus.alerts(LAG_ALERT),
                    30,
                )
                resolved = time.monotonic()
                assert prometheus.query(f'up{{job="{JOB}"}} == 1')
            finally:
                timeline.stop()
                await load.stop()
            verdict = await verify_all(load, client, 60)
    finally:
        prometheus.set_targets([])
        await deployment.close()

    assert timeline.states(LAG_ALERT, 0, before) <= {""}, "the lag alert fired before the outage"
    assert "firing" in timeline.states(LAG_ALERT, before, healed), timeline.samples
    assert "firing" in timeline.states(FAILING_ALERT, before, healed), timeline.samples
    assert timeline.states(LAG_ALERT, resolved, resolved + 60) <= {""}
    assert "Tier 2 lag" in outcome.note and "caught up" in outcome.note, outcome.note
    assert verdict.lost == 0 and verdict.torn_bytes == 0, verdict.problems
    assert load.stats.acknowledged > 0
