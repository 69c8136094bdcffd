"""Chained exactly-once appends (``writer_prev_seq``, docs/api.md, Exactly-once appends): a
batch is applied only right after its predecessor, even when several are in flight at once,
and what the chain rests on (the writer's last applied sequence number) survives restarts."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from segmentstore import InvalidArgumentError, SegmentStore, WriterSeqMismatchError

from .test_store_api import read_all


async def test_a_chained_append_goes_only_right_after_its_predecessor(store: SegmentStore) -> None:
    await store.create_segment("chain/a")
    first = await store.append("chain/a", b"one", writer_id="w", writer_seq=10)
    with pytest.raises(WriterSeqMismatchError) as gap:
        await store.append("chain/a", b"three", writer_id="w", writer_seq=30, writer_prev_seq=20)
    assert (gap.value.writer_prev_seq, gap.value.last_writer_seq) == (20, 10)
    assert gap.value.fields() == {"writer_prev_seq": 20, "last_writer_seq": 10}
    second = await store.append("chain/a", b"two", writer_id="w", writer_seq=20, writer_prev_seq=10)
    third = await store.append(
        "chain/a", b"three", writer_id="w", writer_seq=30, writer_prev_seq=20
    )
    assert (first.offset, second.offset, third.offset) == (0, 3, 6)
    assert await read_all(store, "chain/a") == b"onetwothree"


async def test_a_writer_that_applied_nothing_has_no_last_seq(store: SegmentStore) -> None:
    await store.create_segment("chain/b")
    await store.append("chain/b", b"x", writer_id="other", writer_seq=5)
    with pytest.raises(WriterSeqMismatchError) as none:
        await store.append("chain/b", b"y", writer_id="w", writer_seq=2, writer_prev_seq=1)
    assert none.value.last_writer_seq is None
    assert await read_all(store, "chain/b") == b"x"


async def test_a_resent_batch_is_a_duplicate_before_its_chain_is_checked(
    store: SegmentStore,
) -> None:
    await store.create_segment("chain/c")
    await store.append("chain/c", b"a", writer_id="w", writer_seq=1)
    await store.append("chain/c", b"b", writer_id="w", writer_seq=2, writer_prev_seq=1)
    await store.append("chain/c", b"c", writer_id="w", writer_seq=3, writer_prev_seq=2)
    # Its answer was lost; sent again with the same numbers, it changes nothing.
    again = await store.append("chain/c", b"b", writer_id="w", writer_seq=2, writer_prev_seq=1)
    assert again.duplicate and again.length == 3
    assert await read_all(store, "chain/c") == b"abc"


async def test_batches_in_flight_together_land_in_order(store: SegmentStore) -> None:
    """Eight chained batches submitted in one loop iteration (as a pipelining writer's
    requests arrive): all applied, in chain order."""
    await store.create_segment("chain/d")
    await store.append("chain/d", b"0", writer_id="w", writer_seq=100)
    results = await asyncio.gather(
        *(
            store.append("chain/d", b"%d" % n, writer_id="w", writer_seq=100 + n,
                         writer_prev_seq=99 + n)
            for n in range(1, 9)
        )
    )  # fmt: skip
    assert [r.offset for r in results] == list(range(1, 9))
    assert await read_all(store, "chain/d") == b"012345678"


async def test_a_batch_that_overtakes_its_predecessor_is_refused_and_nothing_else(
    store: SegmentStore,
) -> None:
    await store.create_segment("chain/e")
    await store.append("chain/e", b"a", writer_id="w", writer_seq=1)
    late, early = await asyncio.gather(
        store.append("chain/e", b"c", writer_id="w", writer_seq=3, writer_prev_seq=2),
        store.append("chain/e", b"b", writer_id="w", writer_seq=2, writer_prev_seq=1),
        return_exceptions=True,
    )
    assert isinstance(late, WriterSeqMismatchError) and late.last_writer_seq == 1
    assert not isinstance(early, BaseException) and early.offset == 1
    again = await store.append("chain/e", b"c", writer_id="w", writer_seq=3, writer_prev_seq=2)
    assert again.offset == 2
    assert await read_all(store, "chain/e") == b"abc"


async def test_chained_events_are_checked_the_same_way(store: SegmentStore) -> None:
    await store.create_segment("chain/f")
    await store.append_events("chain/f", [b"a"], writer_id="w", writer_seq=1)
    with pytest.raises(WriterSeqMismatchError):
        await store.append_events("chain/f", [b"c"], writer_id="w", writer_seq=3, writer_prev_seq=2)
    done = await store.append_events("chain/f", [b"b"], writer_id="w", writer_seq=2,
                                     writer_prev_seq=1)  # fmt: skip
    assert done.events == 1 and done.offset == 9


@pytest.mark.parametrize(
    "arguments",
    [
        {"writer_prev_seq": 1},  # without a writer
        {"writer_id": "w", "writer_seq": 5, "writer_prev_seq": 5},  # not below its own
        {"writer_id": "w", "writer_seq": 5, "writer_prev_seq": -1},
    ],
)
async def test_bad_chain_arguments_are_refused(
    store: SegmentStore, arguments: dict[str, Any]
) -> None:
    await store.create_segment("chain/g")
    with pytest.raises(InvalidArgumentError):
        store.append("chain/g", b"x", **arguments)
    assert (await store.get_info("chain/g")).length == 0


async def test_the_chain_goes_on_after_a_restart(tmp_path: Path) -> None:
    async with SegmentStore.open(tmp_path / "data", containers=2) as store:
        await store.create_segment("kept")
        await store.append("kept", b"a", writer_id="w", writer_seq=7)
        await store.append("kept", b"b", writer_id="w", writer_seq=9, writer_prev_seq=7)
        container = store.container_of("kept")
    async with SegmentStore.open(tmp_path / "data", containers=2) as store:
        with pytest.raises(WriterSeqMismatchError) as stale:
            await store.append("kept", b"x", writer_id="w", writer_seq=12, writer_prev_seq=7)
        assert stale.value.last_writer_seq == 9
        await store.restart_container(container)  # replayed from Tier 1 once more
        done = await store.append("kept", b"c", writer_id="w", writer_seq=12, writer_prev_seq=9)
        assert done.offset == 2
        assert await read_all(store, "kept") == b"abc"
