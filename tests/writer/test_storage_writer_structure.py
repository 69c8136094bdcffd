"""The Storage Writer against a local Tier 2: truncations and merges.

A truncation deletes exactly the chunks wholly below the new start (and their time index
sidecars); a merge adopts the transaction's chunks, whether they reached Tier 2 before the merge,
partly or not at all, running or after a restart.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from store_checks import flush, read_all

from segmentstore import (
    SegmentNotFoundError,
    SegmentTruncatedError,
)
from segmentstore.contracts.mapping import container_of
from segmentstore.tier2 import (
    chunks_of,
)

from .writer_harness import (
    MANUAL,
    KiB,
    MiB,
    chunk_files,
    cli,
    load_manifest,
    open_store,
    sidecar_files,
    tier2_bytes,
    tier2_files,
    tier2_root,
)

# -- truncation ---------------------------------------------------------------------------


async def test_truncate_deletes_whole_chunks_below_the_start_offset(tmp_path: Path) -> None:
    data = tmp_path / "data"
    chunk = 4 * KiB
    name = "trunc/me"
    payload = os.urandom(40_000)
    async with open_store(data, storage_writer={**MANUAL, "max_chunk_bytes": chunk}) as store:
        await store.create_segment(name)
        for i in range(0, len(payload), 1000):
            await store.append(name, payload[i : i + 1000])
        await flush(store)
        before = chunk_files(data, name)
        starts = [int(f.rsplit("/", 1)[1].split("-")[1]) for f in before]
        assert starts == list(range(0, len(payload), chunk))

        await store.truncate(name, 10_000)  # inside the chunk [8192, 12288)
        await flush(store)
        after = chunk_files(data, name)
        assert after == before[2:]  # [0, 4096) and [4096, 8192) are gone, [8192, ...) stays
        # Time index sidecars go with their chunks (a chunk without a boundary has none).
        assert sidecar_files(data, name)
        assert set(sidecar_files(data, name)) <= {f + ".tidx" for f in after}
        manifest, stored = tier2_bytes(data, name)
        assert (manifest.start_offset, manifest.storage_length) == (10_000, len(payload))
        assert [c.start_offset for c in manifest.chunks] == starts[2:]
        assert stored == payload[10_000:]

        await store.truncate(name, 3 * chunk)  # exactly where a chunk starts: it stays
        await flush(store)
        assert chunk_files(data, name) == before[3:]

        # Truncated beyond what Tier 2 holds: every chunk goes, and the manifest says so.
        await store.append(name, b"tail" * 1000)
        length = len(payload) + 4000
        await store.truncate(name, length)
        await flush(store)
        assert chunk_files(data, name) == []
        manifest, stored = tier2_bytes(data, name)
        assert (manifest.start_offset, manifest.storage_length, stored) == (length, length, b"")
        await store.append(name, b"after")
        await flush(store)

    code, out, err = await cli("cat", tier2_root(data).as_uri(), name)
    assert (code, out) == (0, b"after"), err
    async with open_store(data, storage_writer=MANUAL) as store:
        with pytest.raises(SegmentTruncatedError):
            await store.read(name, length - 1, 10)
        assert bytes(await store.read(name, length, 10)) == b"after"


# -- merge --------------------------------------------------------------------------------


@pytest.mark.parametrize("flushed", ["all", "part", "none"])
@pytest.mark.parametrize("restart", [False, True], ids=["running", "restarted"])
async def test_merge_concatenates_in_tier2(tmp_path: Path, flushed: str, restart: bool) -> None:
    """The transaction's bytes end up in the target's manifest, whether they were in Tier 2
    before the merge (their chunks are adopted), partly, or not at all; ``restarted``: the
    store stops before the writer applies the merge and recovery has to."""
    data = tmp_path / "data"
    target = "merge/target"
    head, body, tail = os.urandom(10_000), os.urandom(9_000), os.urandom(3_000)
    writer = {**MANUAL, "max_chunk_bytes": 4 * KiB}
    async with open_store(data, storage_writer=writer) as store:
        await store.create_segment(target)
        await store.append(target, head)
        await flush(store)
        txn = await store.begin_transaction(target)
        await store.append(txn, body)
        if flushed in ("all", "part"):
            await flush(store)
        if flushed in ("part", "none"):
            await store.append(txn, tail)
            merged = body + tail
        else:
            merged = body
        txn_chunks = chunk_files(data, txn)
        assert bool(txn_chunks) == (flushed != "none")
        result = await store.merge(target, txn)
        assert (result.offset, result.length) == (len(head), len(head) + len(merged))
        expected = head + merged
        assert await read_all(store, target) == expected
        if not restart:
            await flush(store)
    if restart:
        async with open_store(data, storage_writer=writer) as store:
            assert await read_all(store, target) == expected
            await flush(store)

    manifest, stored = tier2_bytes(data, target)
    assert stored == expected
    assert manifest.storage_length == len(expected)
    named = {c.key for c in manifest.chunks}
    # The transaction's chunks were adopted where they lie, not copied.
    assert {*txn_chunks} <= named
    assert load_manifest(data, txn) is None
    # Nothing of the transaction is left but the chunks the target names.
    txn_prefix = chunks_of(txn)
    left = [f for f in tier2_files(data) if f.startswith(txn_prefix)]
    assert [f for f in left if not f.endswith(".tidx")] == sorted(txn_chunks)
    assert {f.removesuffix(".tidx") for f in left} == set(txn_chunks)  # and their sidecars
    code, out, err = await cli("cat", tier2_root(data).as_uri(), target)
    assert (code, out == expected) == (0, True), err
    async with open_store(data, storage_writer=writer) as store:
        assert await read_all(store, target) == expected
        with pytest.raises(SegmentNotFoundError):
            await store.get_info(txn)
        # Deleting the target deletes the adopted chunks too.
        await store.delete_segment(target)
        await flush(store)
    assert [f for f in tier2_files(data) if f.startswith(("chunks/", "names/"))] == []


@pytest.mark.parametrize("evicted", [False, True], ids=["cached", "evicted"])
async def test_truncating_into_a_merged_range_before_the_writer_applies_the_merge(
    tmp_path: Path, evicted: bool
) -> None:
    """The target is truncated to an offset inside the transaction's bytes in the same batch
    as the merge, before the writer has caught the target up to the merge offset. The
    transaction's bytes above the new start must stay readable and reach the target's
    manifest; its chunks must not be left behind unnamed (``evicted``: the cache no longer
    has them, so Tier 2 is their only copy)."""
    data = tmp_path / "data"
    target = "merge/truncated"
    async with open_store(
        data,
        store={"max_append_bytes": 256 * KiB},
        cache={"max_bytes": 2 * MiB, "max_entry_bytes": 64 * KiB},
        storage_writer={**MANUAL, "max_chunk_bytes": 64 * KiB, "read_block_bytes": 64 * KiB},
    ) as store:
        await store.create_segment(target)
        await store.append(target, b"A" * 1000)
        txn = await store.begin_transaction(target)
        body = os.urandom(300 * KiB)
        for i in range(0, len(body), 100 * KiB):
            await store.append(txn, body[i : i + 100 * KiB])
        await flush(store)
        if evicted:
            filler = "filler"
            await store.create_segment(filler)
            for _ in range(20):  # twice the cache, flushed as it goes
                await store.append(filler, os.urandom(200 * KiB))
                await flush(store)
            assert store.cache_manager.stats.evictions > 0
        await store.append(target, b"B" * 500)  # not in Tier 2 yet: Tier 2 is behind 1500
        merged, truncated = await asyncio.gather(
            store.merge(target, txn), store.truncate(target, 1600)
        )
        assert (merged.offset, truncated.start_offset) == (1500, 1600)
        await flush(store)
        container = store.containers[container_of(target, 4)]
        assert container.status.value == "running", container.failure
        assert await read_all(store, target) == body[100:]
    manifest, stored = tier2_bytes(data, target)
    assert (manifest.start_offset, stored) == (1600, body[100:])
    named = {c.key for c in manifest.chunks}
    txn_prefix = chunks_of(txn)
    leftovers = [
        f
        for f in tier2_files(data)
        if f.startswith(txn_prefix) and f.removesuffix(".tidx") not in named
    ]
    assert leftovers == [], "the transaction's chunks were left behind, named by no manifest"
