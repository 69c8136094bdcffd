"""A Tier 2 written in the earlier layout (a directory per segment, keyed by hash) is refused by
the store with the command that fixes it, and ``segmentstore tier2 migrate`` moves every
manifest to layout 2, keeping every byte where it is; a run cut short is run again."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from segmentstore import InvalidArgumentError, SegmentStore
from segmentstore.cli import main
from segmentstore.tier2 import FileChunkStorage, ManifestStore, SegmentReader
from segmentstore.tier2.layout_migration import holds_layout_1, migrate_layout


def layout_1_segment(storage: FileChunkStorage, name: str, data: bytes, epoch: int = 3) -> None:
    """What the earlier version wrote for a segment: a chunk and a format-1 manifest in the
    segment's own directory."""
    directory = "segments/" + hashlib.sha256(name.encode()).hexdigest()[:32]
    chunk = f"{directory}/chunk-{0:020d}-e{epoch:010d}-s{7:010d}"
    storage.create(chunk, [data])
    document = {
        "format_version": 1,
        "name": name,
        "segment_id": 7,
        "version": 4,
        "owner_epoch": epoch,
        "start_offset": 0,
        "storage_length": len(data),
        "sealed": True,
        "chunks": [{"key": chunk, "start_offset": 0, "length": len(data)}],
    }
    storage.put_if(f"{directory}/manifest.json", json.dumps(document).encode(), None)


async def test_a_layout_1_tier2_is_refused_then_migrated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "tier2"
    storage = FileChunkStorage(root)
    names = [f"old/{i}" for i in range(5)]
    for name in names:
        layout_1_segment(storage, name, name.encode() * 10)
    storage.put_if("segments/" + "0" * 32 + "/manifest.json", b"{broken", None)
    assert holds_layout_1(storage)

    with pytest.raises(InvalidArgumentError, match="segmentstore tier2 migrate"):
        await SegmentStore.open(tmp_path / "data", tier2=root.as_uri()).start()

    assert main(["tier2", "migrate", root.as_uri()]) == 1  # one manifest is unreadable
    out, err = capsys.readouterr()
    assert "5 segments migrated, 0 were already (1 unreadable)" in out
    assert "not migrated: segments/" + "0" * 32 + "/manifest.json" in err
    reader = SegmentReader(storage)
    assert reader.list_names("old/") == names
    for name in names:
        loaded = ManifestStore(storage).load(name)
        assert loaded is not None
        manifest = loaded[0]
        assert (manifest.owner_epoch, manifest.version, manifest.sealed) == (3, 4, True)
        assert manifest.state is None  # the earlier version kept none
        assert reader.read(name, 0, 1000) == name.encode() * 10

    # Run again (the damaged one is still there): nothing is migrated twice.
    report = migrate_layout(storage)
    assert (report.migrated, report.already, len(report.unreadable or [])) == (0, 0, 1)
    storage.delete("segments/" + "0" * 32 + "/manifest.json")
    assert not holds_layout_1(storage)
    storage.close()
