"""A cancelled caller: its operation, once admitted, goes on; the others are not disturbed.

Operations enqueued together share one batch window and wait on one future. Cancelling a task
cancels the future it awaits, so these tests check that one cancelled caller costs the callers
sharing its window nothing.
"""

from __future__ import annotations

import asyncio

import pytest
from faults import fail_processing_of

from segmentstore import ContainerUnavailableError, SegmentSealedError, SegmentStore


async def test_a_cancelled_append_does_not_fail_the_appends_sharing_its_window(
    store: SegmentStore,
) -> None:
    await store.create_segment("s")
    appends = [asyncio.ensure_future(store.append("s", bytes([i]) * 10)) for i in range(8)]
    await asyncio.sleep(0)  # all admitted, into one window
    appends[3].cancel()
    outcomes = await asyncio.gather(*appends, return_exceptions=True)

    assert isinstance(outcomes[3], asyncio.CancelledError)
    others = [o for i, o in enumerate(outcomes) if i != 3]
    assert not [o for o in others if isinstance(o, BaseException)], others
    # Admitted before the cancellation, the cancelled append was made too, in its place.
    assert [o.offset for o in others] == [0, 10, 20, 40, 50, 60, 70]  # type: ignore[union-attr]
    assert bytes(await store.read("s", 30, 10)) == bytes([3]) * 10
    assert (await store.get_info("s")).length == 80


async def test_an_operation_joining_a_window_after_a_cancellation_completes(
    store: SegmentStore,
) -> None:
    await store.create_segment("s")
    cancelled = asyncio.ensure_future(store.append("s", b"a"))
    await asyncio.sleep(0)
    cancelled.cancel()
    # These join the window whose shared future is cancelled already.
    result = await store.append("s", b"b")
    await store.seal("s")
    assert result.offset == 1
    info = await store.get_info("s")
    assert info.sealed and info.length == 2
    assert cancelled.cancelled()


async def test_a_metadata_operation_sharing_the_window_of_a_cancelled_one_completes(
    store: SegmentStore,
) -> None:
    await store.create_segment("s")
    append = asyncio.ensure_future(store.append("s", b"x"))
    seal = asyncio.ensure_future(store.seal("s"))
    await asyncio.sleep(0)  # both admitted, the append first
    append.cancel()
    info = await seal  # not a CancelledError: it was not cancelled
    assert info.sealed and info.length == 1
    assert append.cancelled()
    with pytest.raises(SegmentSealedError):
        await store.append("s", b"y")


async def test_a_window_that_fails_after_a_cancellation_fails_every_caller_in_it(
    store: SegmentStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The window's shared future is cancelled, then the window fails before the others in it
    # look again: they must learn of the failure, not take their appends for made.
    await store.create_segment("s")
    fail_processing_of(monkeypatch, b"boom")
    cancelled = asyncio.ensure_future(store.append("s", b"a"))
    other = asyncio.ensure_future(store.append("s", b"b"))
    boom = asyncio.ensure_future(store.append("s", b"boom"))
    await asyncio.sleep(0)  # all three admitted into one window
    cancelled.cancel()
    outcomes = await asyncio.gather(cancelled, other, boom, return_exceptions=True)
    assert isinstance(outcomes[0], asyncio.CancelledError)
    assert isinstance(outcomes[1], ContainerUnavailableError), outcomes[1]
    assert isinstance(outcomes[2], ContainerUnavailableError), outcomes[2]
