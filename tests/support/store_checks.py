"""Looking at what a store holds, in memory and in Tier 2: shared by the local and the S3 Tier 2
tests (``tests/support`` is on pytest's ``pythonpath``)."""

from __future__ import annotations

from segmentstore import SegmentStore
from segmentstore.tier2 import ChunkStorage, ManifestStore, SegmentManifest, SegmentReader


async def flush(store: SegmentStore) -> None:
    """Everything pending goes to Tier 2 now, in every container."""
    for container in store.containers:
        writer = container.storage_writer
        assert writer is not None, f"container {container.id} has no storage writer"
        await writer.flush_all()


async def read_all(store: SegmentStore, name: str) -> bytes:
    """The segment's readable bytes, from its start offset to its length."""
    info = await store.get_info(name)
    out = bytearray()
    while info.start_offset + len(out) < info.length:
        chunk = await store.read(name, info.start_offset + len(out), 1 << 20)
        assert len(chunk) > 0, f"{name}: empty read at {info.start_offset + len(out)} of {info}"
        out += chunk
    return bytes(out)


def stored_segment(storage: ChunkStorage, name: str) -> tuple[SegmentManifest, bytes]:
    """The manifest of ``name`` in Tier 2 and every byte it names, ``[start, storage length)``;
    closes ``storage``."""
    try:
        loaded = ManifestStore(storage).load(name)
        assert loaded is not None, f"{name} has no manifest in Tier 2"
        manifest = loaded[0]
        length = manifest.storage_length - manifest.start_offset
        return manifest, SegmentReader(storage).read_from(manifest, manifest.start_offset, length)
    finally:
        storage.close()
