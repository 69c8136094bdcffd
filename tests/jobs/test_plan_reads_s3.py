"""Planning a Spark read of a prefix reads Tier 2 in proportion to what it selects: among many
segments on S3 (moto), a plan of a 100-segment prefix reads at most ten objects (or listings)
besides the selected segments' own manifests and chunks, and ``tier2 ls`` of the prefix reads
no other manifest; a stream, which selects again every micro-batch, reads again only the
manifests that changed."""

from __future__ import annotations

import dataclasses
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from segmentstore.bench.counting_storage import CountingStorage
from segmentstore.jobs.options import ScanOptions
from segmentstore.jobs.planner import plan_scan
from segmentstore.jobs.selection import select_segments
from segmentstore.tier2 import (
    ChunkInfo,
    ManifestsSeen,
    ManifestStore,
    SegmentManifest,
    SegmentReader,
    chunk_key,
    chunks_of,
    manifest_key,
    open_chunk_storage,
)

pytestmark = pytest.mark.s3

CREDENTIALS = {"access_key": "testing", "secret_key": "testing", "region": "us-east-1"}
SELECTED = [f"plan/seg-00001{i:02d}" for i in range(100)]  # prefix plan/seg-00001
OTHERS = [f"plan/seg-{i:07d}" for i in range(200, 1200)] + [f"other/{i}" for i in range(300)]


def make_segment(storage: Any, name: str) -> None:
    key = chunk_key(name, 0, 1)
    storage.create(key, [name.encode()])
    manifest = SegmentManifest(
        name=name,
        chunks=(ChunkInfo(key, 0, len(name)),),
        storage_length=len(name),
        start_offset=0,
        sealed=False,
        owner_epoch=1,
        version=0,
    )
    ManifestStore(storage).save(manifest, None, 1)


def test_planning_a_prefix_reads_what_it_selects(moto_endpoint: str) -> None:
    uri = f"s3://plan-reads/{uuid.uuid4().hex}"
    options = {"endpoint_url": moto_endpoint, **CREDENTIALS}
    storage = open_chunk_storage(uri, options={**options, "create_bucket": True})
    try:
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda n: make_segment(storage, n), SELECTED + OTHERS))
    finally:
        storage.close()

    counting = CountingStorage(open_chunk_storage(uri, options=options))
    try:
        scan = ScanOptions.parse(
            {"tier2": uri, "segments": "plan/seg-00001*", "mode": "bytes"}
            | {f"tier2.{k}": v for k, v in options.items()}
        )
        plan = plan_scan(scan, counting)
        assert sorted(s.name for s in plan.segments) == SELECTED
        own = tuple(manifest_key(n) for n in SELECTED) + tuple(chunks_of(n) for n in SELECTED)
        others = [key for key in counting.touched if not key.startswith(own)]
        print(
            f"planning a 100-segment prefix among {len(SELECTED) + len(OTHERS)} segments read"
            f" {len(counting.touched) - len(others)} of their own objects and {len(others)}"
            f" other: {others}"
        )
        assert len(others) <= 10, others
        assert any(key.startswith(own) for key in counting.touched)

        counting.touched.clear()
        names = SegmentReader(counting).list_names("plan/seg-00001")
        assert names == SELECTED
        assert len(counting.touched) == 1  # one listing, no manifest read
    finally:
        counting.close()


@pytest.mark.parametrize("backend", ["file", "s3"])
def test_a_stream_reads_again_only_the_manifests_that_changed(
    backend: str, moto_endpoint: str, tmp_path: Path
) -> None:
    """A stream selects its segments again every micro-batch: the listing's stamps (S3's
    ETags, a file's inode and time) tell which manifests changed since it last read them."""
    if backend == "s3":
        uri = f"s3://plan-reads/{uuid.uuid4().hex}"
        options = {"endpoint_url": moto_endpoint, **CREDENTIALS}
        setup = open_chunk_storage(uri, options={**options, "create_bucket": True})
    else:
        uri, options = (tmp_path / "tier2").as_uri(), {}
        setup = open_chunk_storage(uri)
    names = [f"stream/{i:03d}" for i in range(40)]
    try:
        for name in names:
            make_segment(setup, name)
    finally:
        setup.close()
    counting = CountingStorage(open_chunk_storage(uri, options=options))
    seen: ManifestsSeen = {}
    scan = ScanOptions.parse(
        {"tier2": uri, "segments": "stream/*"} | {f"tier2.{k}": v for k, v in options.items()}
    )
    try:
        first = select_segments(scan, counting, required=False, seen=seen)
        assert [m.name for m in first] == names
        assert len(counting.touched) == 1 + len(names)  # a listing, then every manifest
        counting.touched.clear()
        again = select_segments(scan, counting, required=False, seen=seen)
        assert again == first and counting.touched == ["names/1s1t/1r1e/1a1m/03"]
        loaded = ManifestStore(counting.inner).load(names[7])
        assert loaded is not None
        ManifestStore(counting.inner).save(
            dataclasses.replace(loaded[0], sealed=True), loaded[1], 1
        )
        counting.inner.delete(manifest_key(names[9]))
        counting.touched.clear()
        third = select_segments(scan, counting, required=False, seen=seen)
        assert [m.name for m in third] == names[:9] + names[10:]
        assert third[7].sealed and counting.touched == [
            "names/1s1t/1r1e/1a1m/03",
            manifest_key(names[7]),
        ]
    finally:
        counting.close()
