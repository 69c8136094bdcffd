"""A timestamp resolves, from Tier 2 alone, to the offset the store's ``:offsetAt`` answers,
for appends made over time by the real store and flushed across many chunks (no Spark)."""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path

from store_checks import flush

from segmentstore import SegmentStore
from segmentstore.jobs.boundaries import SegmentBoundaries
from segmentstore.tier2 import ManifestStore, open_chunk_storage, read_time_index

from .conftest import FAST_WRITER, KiB


async def test_a_timestamp_resolves_as_offset_at_answers(tmp_path: Path) -> None:
    name = "times/0"
    rng = random.Random(31)
    async with SegmentStore.open(
        tmp_path / "data",
        storage_writer={**FAST_WRITER, "max_chunk_bytes": 4 * KiB},
        store={"time_index_interval_bytes": 512},
    ) as store:
        await store.create_segment(name)
        for _ in range(120):
            payloads = [rng.randbytes(rng.randint(0, 300)) for _ in range(rng.randint(1, 4))]
            await store.append_events(name, payloads)
            await asyncio.sleep(0.003)  # so that appends get different times
        await flush(store)
        info = await store.get_info(name)
        assert info.storage_length == info.length
        await store.truncate(name, 3 * KiB)  # not a boundary, most likely: :offsetAt clamps
        await flush(store)

        storage = open_chunk_storage((tmp_path / "data" / "tier2").as_uri())
        try:
            loaded = ManifestStore(storage).load(name)
            assert loaded is not None
            manifest = loaded[0]
            assert manifest.start_offset == 3 * KiB and len(manifest.chunks) > 5
            times = sorted(
                {e.time_ms for c in manifest.chunks for e in read_time_index(storage, c)}
            )
            assert len(times) > 30
            boundaries = SegmentBoundaries(storage, manifest)
            # every recorded time, just before and after it, and before the first
            asked = [times[0] - 1000, *(t + d for t in times for d in (-1, 0, 1))]
            answers = {t: boundaries.at_time(t) for t in asked}
            expected = {t: await store.offset_at(name, t) for t in asked}
            # later than every append: the store, which knows when its last append was made,
            # answers its length; Tier 2 alone answers the last boundary it recorded, which
            # is never later (at most one index interval of earlier events more)
            later = int(time.time() * 1000) + 1000
            last_recorded = boundaries.recorded_at_or_below(manifest.storage_length)
            assert await store.offset_at(name, later) == manifest.storage_length
            assert boundaries.at_time(later) == last_recorded
            assert manifest.storage_length - 512 - 4 * 308 <= boundaries.at_time(later)
        finally:
            storage.close()
    assert answers == expected
    assert len(set(answers.values())) > 20
