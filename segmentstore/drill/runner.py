"""A drill from start to end: load, faults at moments chosen by the seed, verification after
each fault and at the end, and the report.

Every fault kind this deployment allows is injected at least once (in an order the seed
shuffles), after a random pause (``pause_s``, one to four seconds by default) each; once each
has had its turn, kinds are drawn at random until ``duration_s`` is over. A long drill (a soak,
:data:`SOAK_S` or more) gives every kind a turn again in its last :data:`FINAL_ROUND_S`, so
that recoveries at the end can be compared with those at the start. After each fault, once
the store has healed, what was appended since the check before is read back and checked
against what the writers were told; at the end every segment is read back whole. Meanwhile
the nodes' resources are sampled (:mod:`segmentstore.drill.resources`); one that keeps growing
fails the drill.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from segmentstore.drill.deployment import Deployment
from segmentstore.drill.faults import KINDS, FaultContext, fault_class, find_probes
from segmentstore.drill.faults.context import Cluster
from segmentstore.drill.ledger import Verdict
from segmentstore.drill.load import Load, answered
from segmentstore.drill.report import DrillReport, FaultRecord
from segmentstore.drill.resources import ResourceSampler
from segmentstore.drill.verify import exactly_once_failures, verify_all


@dataclass(frozen=True)
class DrillOptions:
    duration_s: float
    seed: int
    faults: tuple[str, ...] = KINDS
    segments: int = 16
    writers: int = 8
    readers: int = 2
    payload_bytes: tuple[int, int] = (64, 4096)
    hold_s: tuple[float, float] = (2.0, 4.0)
    pause_s: tuple[float, float] = (1.0, 4.0)  # between one fault's healing and the next
    max_recovery_s: float = 60.0
    sample_s: float = 10.0  # between two samples of the nodes' resources
    token: str | None = None  # the bearer token a deployment with auth wants (never printed)


SOAK_S = 1200.0
FINAL_ROUND_S = 300.0
# Segments read back after each fault, at most: a drill over 200,000 segments touches tens of
# thousands between two faults, and reading them all took the drill's time from its faults.
CHECKED_AFTER_A_FAULT = 2_000


Progress = Callable[[str, DrillReport, float], None]  # (event, report so far, elapsed s)


async def run_drill(
    deployment: Deployment, options: DrillOptions, progress: Progress
) -> DrillReport:
    report = DrillReport(seed=options.seed, max_recovery_s=options.max_recovery_s)
    rng = random.Random(options.seed)
    reasons = {kind: fault_class(kind).unavailable(deployment) for kind in options.faults}
    kinds = [kind for kind, reason in reasons.items() if reason is None]
    report.skipped = {kind: reason for kind, reason in reasons.items() if reason is not None}
    keep = False
    try:
        await deployment.start()  # inside: a drill stopped while it starts stops what started
        limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
        transport = None
        if isinstance(deployment, Cluster):
            transport = deployment.transport(limits, rng.randrange(1 << 30))
        headers = {} if options.token is None else {"Authorization": f"Bearer {options.token}"}
        async with httpx.AsyncClient(
            base_url=deployment.url, timeout=30, limits=limits, transport=transport, headers=headers
        ) as client:
            await _drill(deployment, client, options, rng, kinds, report, progress)
        keep = not report.passed
    except Exception:
        keep = True  # a drill that could not finish: what it saw is the evidence
        raise
    finally:
        kept = await deployment.close(keep)
        if kept is not None:
            report.kept = str(kept)
            progress(f"kept the deployment's logs and data in {kept}", report, report.duration_s)
    return report


async def _drill(
    deployment: Deployment,
    client: httpx.AsyncClient,
    options: DrillOptions,
    rng: random.Random,
    kinds: list[str],
    report: DrillReport,
    progress: Progress,
) -> None:
    await _wait_ready(client, options.max_recovery_s * 2)
    names = [f"drill/segment-{i:03d}" for i in range(options.segments)]
    load = Load(
        client,
        names,
        options.writers,
        options.readers,
        options.payload_bytes,
        rng.randrange(1 << 30),
    )
    await load.create_segments(
        lambda count: progress(f"created {count:,} of {len(names):,} segments", report, 0.0)
    )
    containers = (await answered(client, "GET", "/v1/containers")).json()["containers"]
    probes = await find_probes(client, len(containers))
    context = FaultContext(
        deployment, client, probes, rng, options.hold_s, options.max_recovery_s, names
    )
    sampler = ResourceSampler(deployment.node_urls, options.sample_s)
    started = time.monotonic()
    load.start()
    sampler.start()
    first_round = kinds[:]
    rng.shuffle(first_round)
    final_round_at = options.duration_s - FINAL_ROUND_S if options.duration_s >= SOAK_S else None
    checked_to: dict[str, int] = {}  # segment -> how far the checks after faults have read
    try:
        while kinds and (first_round or time.monotonic() - started < options.duration_s):
            pause = rng.uniform(*options.pause_s)
            await _pause(pause, started, options.duration_s, report, progress, load)
            elapsed = time.monotonic() - started
            if final_round_at is not None and elapsed >= final_round_at:
                final_round_at = None  # every kind once more, at the end of the soak
                first_round = kinds[:]
                rng.shuffle(first_round)
            if not first_round and time.monotonic() - started >= options.duration_s:
                break
            kind = first_round.pop() if first_round else rng.choice(kinds)
            at_s = time.monotonic() - started
            progress(f"fault {kind}", _snapshot(report, load), at_s)
            outcome = await fault_class(kind)(context).run()
            report.faults.append(
                FaultRecord(
                    kind, round(at_s, 2), outcome.recovery_s, outcome.note, outcome.measures
                )
            )
            report.problems.extend(outcome.problems)
            took = "did not heal" if outcome.recovery_s is None else f"{outcome.recovery_s:.2f} s"
            progress(
                f"healed from {kind}: {took}", _snapshot(report, load), time.monotonic() - started
            )
            if outcome.recovery_s is not None:
                # What the previous checks read is read again only at the end: reading
                # everything after every fault grows with the square of the run's length.
                verdict = await verify_all(
                    load, client, options.max_recovery_s, checked_to, most=CHECKED_AFTER_A_FAULT
                )
                checked_to.update(verdict.ends)
                _merge(report, verdict)
        remaining = options.duration_s - (time.monotonic() - started)
        if remaining > 0:
            await _pause(remaining, started, options.duration_s, report, progress, load)
    finally:
        await load.stop()
        await sampler.stop()
    report.duration_s = time.monotonic() - started
    report.resources = sampler.to_json()
    report.growing = [trend.series for trend in sampler.trends() if trend.growing]
    try:
        await _wait_ready(client, options.max_recovery_s)
        ready = True
    except RuntimeError as error:  # still verify what can be read, and say so
        report.problems.append(str(error))
        ready = False
    final = await verify_all(load, client, options.max_recovery_s)
    report.verified = final.checked
    _merge(report, final)
    if ready:  # else each retry would wait out its own deadline
        failures = await exactly_once_failures(load, client)
        report.exactly_once_failures = len(failures)
        report.problems.extend(failures[:10])
    if isinstance(deployment, Cluster):
        stale = deployment.stale_acknowledgements(load.answered_by)
        report.stale_acknowledged = len(stale)
        report.problems.extend(stale[:10])
    _snapshot(report, load)
    report.problems.extend(load.stats.unexpected[:10])
    progress("done", report, report.duration_s)


def _snapshot(report: DrillReport, load: Load) -> DrillReport:
    stats = load.stats
    report.acknowledged = stats.acknowledged
    report.acknowledged_bytes = stats.acknowledged_bytes
    report.duplicates_answered = stats.duplicates_answered
    report.retries = stats.retries
    report.answers = dict(stats.answers)
    report.read_bytes = stats.read_bytes
    report.torn = max(report.torn, stats.reader_torn)
    return report


def _merge(report: DrillReport, verdict: Verdict) -> None:
    # A check after a fault reads what was appended since the one before, the final check
    # reads everything: the worst count any of them found is reported.
    if verdict.lost > report.lost:
        report.lost, report.lost_reasons = verdict.lost, dict(verdict.lost_reasons)
    report.torn = max(report.torn, verdict.torn_bytes)
    report.duplicated = max(report.duplicated, verdict.duplicated)
    for problem in verdict.problems:
        if problem not in report.problems and len(report.problems) < 20:
            report.problems.append(problem)


async def _pause(
    seconds: float,
    started: float,
    duration_s: float,
    report: DrillReport,
    progress: Progress,
    load: Load,
) -> None:
    until = time.monotonic() + seconds
    while (left := until - time.monotonic()) > 0:
        await asyncio.sleep(min(left, 0.5))
        progress("", _snapshot(report, load), time.monotonic() - started)


async def _wait_ready(client: httpx.AsyncClient, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if (await client.get("/readyz", timeout=5)).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"the deployment was not ready within {timeout_s:.0f} s")
        await asyncio.sleep(0.1)
