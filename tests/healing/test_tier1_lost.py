"""Tier 1 lost, Tier 2 intact (a deleted volume, a new node over old storage): the store refuses
to start over segments it cannot know, instead of starting empty and acknowledging appends to
old names that could never reach Tier 2."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from store_checks import flush

from segmentstore import InvalidArgumentError, SegmentStore


async def test_a_new_data_directory_over_a_used_tier2_is_refused(tmp_path: Path) -> None:
    tier2 = f"file://{tmp_path}/tier2"
    async with SegmentStore.open(tmp_path / "data", tier2=tier2) as store:
        await store.create_segment("scope/stream/0")
        await store.append("scope/stream/0", b"flushed")
        await flush(store)
    shutil.rmtree(tmp_path / "data")  # the Tier 1 volume is gone
    for _attempt in range(2):  # a refused start claims nothing: it is refused again
        with pytest.raises(InvalidArgumentError, match="already holds segments"):
            async with SegmentStore.open(tmp_path / "data", tier2=tier2):
                pass
        assert not (tmp_path / "data" / "store.json").exists()
    # A new data directory over an empty Tier 2 is simply a new deployment.
    async with SegmentStore.open(tmp_path / "other", tier2=f"file://{tmp_path}/empty") as store:
        await store.create_segment("scope/stream/0")
