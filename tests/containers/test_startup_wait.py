"""A starting node's wait for a shared service (segmentstore/containers/startup_wait.py): a
transient error is tried again until the wait is over, any other error ends it at once."""

from __future__ import annotations

import time

import pytest

from segmentstore.containers.startup_wait import retry_while_starting


class NotYet(Exception):
    pass


class Refused(Exception):
    pass


class GaveUp(Exception):
    pass


async def test_a_transient_error_is_tried_again_until_the_step_succeeds() -> None:
    tries = []

    async def step() -> None:
        tries.append(time.monotonic())
        if len(tries) < 3:
            raise NotYet("not yet")

    await retry_while_starting(
        step, transient=(NotYet,), patience_s=5, not_yet="waiting", gave_up=GaveUp
    )
    assert len(tries) == 3
    # The pause doubles: 0.2 s, then 0.4 s.
    assert tries[1] - tries[0] >= 0.2 and tries[2] - tries[1] >= 0.4


async def test_the_wait_ends_after_its_patience_with_the_last_error() -> None:
    tries = 0

    async def step() -> None:
        nonlocal tries
        tries += 1
        raise NotYet(f"try {tries}")

    started = time.monotonic()
    with pytest.raises(GaveUp) as gave_up:
        await retry_while_starting(
            step, transient=(NotYet,), patience_s=1, not_yet="waiting", gave_up=GaveUp
        )
    assert time.monotonic() - started < 1.5
    assert tries >= 3 and str(gave_up.value) == f"try {tries}"
    assert isinstance(gave_up.value.__cause__, NotYet)


async def test_an_error_that_is_not_transient_ends_the_wait_at_once() -> None:
    tries = 0

    async def step() -> None:
        nonlocal tries
        tries += 1
        raise Refused("wrong cluster")

    with pytest.raises(Refused):
        await retry_while_starting(
            step, transient=(NotYet,), patience_s=60, not_yet="waiting", gave_up=GaveUp
        )
    assert tries == 1
