"""Every fault kind is a class of the registry, does its own thing and nothing else's, and an
unknown kind is refused.

Each registered kind runs in every deployment shape it claims, against a deployment that
records which of its effects is called (the spawned deployments themselves are drilled for
real by the other tests here): the first effect a kind calls is its own, no other kind calls
it first in the same shape, and a kind whose shape a deployment lacks is reported as not
injected. docs/operations.md lists the kinds as the registry has them.
"""

from __future__ import annotations

import random
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from segmentstore.drill.faults import (
    FAULTS,
    KINDS,
    FaultContext,
    UnknownFaultError,
    fault_class,
    kinds_for,
)
from segmentstore.drill.faults.fault import SHAPES
from segmentstore.drill.partitions import Held

ROOT = Path(__file__).resolve().parents[2]


class RecordingPartitions:
    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    def __getattr__(self, plan: str) -> Any:
        if plan.startswith("_"):
            raise AttributeError(plan)
        return lambda rng: self.calls.append(plan) or plan

    async def hold(self, kind: str, plan: str, *args: Any) -> Held:
        self.calls.append(f"hold {plan}")
        return Held(0.1, plan)


class RecordingDeployment:
    """A deployment of ``shape`` that has every effect a fault may ask for, each recording that
    it was called (a new fault's effect included: nothing here lists them)."""

    url = "http://drill.invalid"

    def __init__(self, shape: str) -> None:
        self.shape = shape
        self.unavailable: dict[str, str] = {}
        self.calls: list[str] = []
        self.partitions = RecordingPartitions(self.calls) if shape == "cluster" else None

    def __getattr__(self, effect: str) -> Any:
        if effect.startswith("_"):
            raise AttributeError(effect)

        async def record(*args: Any) -> str:
            self.calls.append(effect)
            return effect

        return record

    async def settled(self) -> bool:
        return True

    def paused_node_said(self) -> str:
        return ""

    def transport(self, limits: Any, seed: int) -> Any:
        raise AssertionError("not used")

    def stale_acknowledgements(self, answered_by: dict[str, Any]) -> list[str]:
        return []

    def rss_bytes(self) -> int | None:
        return None


def _healthy(request: httpx.Request) -> httpx.Response:
    if request.url.path == "/v1/containers":
        return httpx.Response(
            200, json={"containers": [{"status": "running", "tier2_lag_bytes": 0}]}
        )
    return httpx.Response(200, json={})


async def _run(kind: str, shape: str) -> list[str]:
    deployment = RecordingDeployment(shape)
    transport = httpx.MockTransport(_healthy)
    async with httpx.AsyncClient(transport=transport, base_url=deployment.url) as client:
        context = FaultContext(deployment, client, ["p/0"], random.Random(1), (0, 0), 5)  # type: ignore[arg-type]
        if shape != "cluster":
            context.cluster = None  # the recording deployment has every method: say which
        outcome = await fault_class(kind)(context).run()
    assert outcome.recovery_s is not None, (kind, shape, outcome.note)
    return deployment.calls


CASES = [(kind, shape) for kind, cls in FAULTS.items() for shape in sorted(cls.shapes)]


@pytest.mark.parametrize(("kind", "shape"), CASES, ids=[f"{k}-{s}" for k, s in CASES])
async def test_each_kind_calls_an_effect_of_its_own(kind: str, shape: str) -> None:
    calls = await _run(kind, shape)
    first = calls[0] if kind != "container_restart" else None
    for other, other_shape in CASES:
        if other != kind and other_shape == shape and other != "container_restart":
            assert (await _run(other, shape))[0] != first, (kind, other, shape)
    if kind == "container_restart":
        assert calls == []  # through the API, not the deployment


async def test_an_unknown_kind_is_refused_not_taken_for_another() -> None:
    for unknown in ("tier2_fulll", "Kill", "", "tier2"):
        with pytest.raises(UnknownFaultError):
            fault_class(unknown)
    assert set(KINDS) == set(FAULTS)


def test_a_kind_of_another_shape_is_reported_not_injected() -> None:
    for kind, cls in FAULTS.items():
        for shape in SHAPES:
            reason = cls.unavailable(RecordingDeployment(shape))  # type: ignore[arg-type]
            assert (reason is None) == (shape in cls.shapes), (kind, shape, reason)
            assert (kind in kinds_for(shape)) == (shape in cls.shapes)
    deployment = RecordingDeployment("node")
    deployment.unavailable["tier1_full"] = "no tmpfs here"
    assert fault_class("tier1_full").unavailable(deployment) == "no tmpfs here"  # type: ignore[arg-type]


def test_operations_md_lists_every_kind_as_the_registry_does() -> None:
    text = (ROOT / "docs" / "operations.md").read_text()
    start = text.index("| kind | deployments | what it does |")
    rows = text[start : text.index("\n\n", start)].splitlines()[2:]
    documented = {}
    for row in rows:
        kind, shapes, what = (cell.strip() for cell in row.strip().strip("|").split("|"))
        documented[kind.strip("`")] = (set(re.findall(r"`(\w+)`", shapes)), what)
    assert documented == {kind: (set(cls.shapes), cls.description) for kind, cls in FAULTS.items()}


def test_the_command_refuses_an_unknown_kind_and_lists_the_known() -> None:
    command = [sys.executable, "-m", "segmentstore.cli", "drill"]
    listed = subprocess.run([*command, "--list-faults"], capture_output=True, text=True, check=True)
    assert [line.split(":")[0] for line in listed.stdout.splitlines()] == list(KINDS)
    refused = subprocess.run(
        [*command, "--spawn", "--faults", "kill,tier2_fulll"], capture_output=True, text=True
    )
    assert refused.returncode == 2 and "tier2_fulll" in refused.stderr
