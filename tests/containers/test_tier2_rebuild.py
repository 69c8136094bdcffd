"""The metadata a rebuild makes from Tier 2 manifests: what each field becomes, where each
segment goes, and manifests that cannot both be right."""

from __future__ import annotations

import pytest

from segmentstore import InvalidArgumentError
from segmentstore.containers.tier2_rebuild import metadata_from_manifests, segments_by_container
from segmentstore.tier2 import ChunkInfo, SegmentManifest


def manifest(name: str, segment_id: int, start: int, length: int, sealed: bool) -> SegmentManifest:
    chunks = (ChunkInfo(f"chunks/00/{'0' * 32}-{segment_id}", 0, length),) if length else ()
    return SegmentManifest(
        name=name,
        chunks=chunks,
        storage_length=length,
        start_offset=start,
        sealed=sealed,
        owner_epoch=3,
        version=9,
        segment_id=segment_id,
    )


def test_each_segment_keeps_what_its_manifest_says() -> None:
    manifests = [manifest("a/b/0", 7, 100, 4096, False), manifest("a/b/1", 2, 0, 10, True)]
    metadata = metadata_from_manifests(5, manifests, now_ms=1234)
    assert metadata.container_id == 5
    first, second = metadata.segments["a/b/0"], metadata.segments["a/b/1"]
    assert (first.id, first.start_offset, first.length, first.storage_length) == (
        7,
        100,
        4096,
        4096,
    )
    assert not first.sealed and not first.sealed_in_storage
    assert (second.id, second.sealed, second.sealed_in_storage) == (2, True, True)
    assert first.attributes == first.writers == first.retention == {}
    assert first.created_ms == first.last_modified_ms == 1234
    assert metadata.next_segment_id == 8  # a new segment never takes a restored id
    metadata.check_invariants()


def test_two_manifests_with_one_segment_id_in_a_container_are_refused() -> None:
    manifests = [manifest("a/b/0", 7, 0, 1, False), manifest("a/b/1", 7, 0, 1, False)]
    with pytest.raises(InvalidArgumentError, match="both carry segment id 7"):
        metadata_from_manifests(0, manifests, now_ms=0)


def test_segments_go_to_the_container_of_their_name() -> None:
    # The check vectors of the mapping, for 4 and 16 containers.
    names = ["scope/stream/0", "myScope/myStream/3", "a", "scope/stream/1#transaction.00ff"]
    found = [manifest(name, i + 1, 0, 0, False) for i, name in enumerate(names)]
    by_container = segments_by_container(found, 4)
    assert {c: [m.name for m in ms] for c, ms in by_container.items()} == {
        3: ["scope/stream/0", "scope/stream/1#transaction.00ff"],
        1: ["myScope/myStream/3"],
        0: ["a"],
    }
    assert [m.name for m in segments_by_container(found, 16)[15]] == [
        "scope/stream/1#transaction.00ff"
    ]
