"""Moving a Tier 2 location from layout 1 to layout 2 (:mod:`segmentstore.tier2.layout`).

Layout 1 kept each segment in a directory of its own, named by the hash of its name
(``segments/<h>/manifest.json`` beside its chunks and their ``.tidx`` sidecars); its manifests
carried no segment state (``format_version`` 1) and its chunks no checksums. Migrating gives
each chunk that has none an index with checksums (read from the chunk as it is now, keeping the
append boundaries its sidecar had, in place of that sidecar), writes each manifest again under
its layout-2 key, as a format-2 manifest with no state that names the very same chunk keys (a
manifest may name chunks anywhere), then removes the layout-1 manifest; chunk bytes stay where
they are. A segment whose manifest keeps no state is served again once the
node's Tier 1 (whose checkpoints from the earlier version hold every segment) has it flushed
with its state, or through a rebuild from Tier 2.

Each segment is migrated on its own and the step is safe to repeat: a run cut short is run
again. Every node must be stopped meanwhile.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from segmentstore.tier2.chunk_index import ChunkIndexBuilder, index_object_key, load_chunk_index
from segmentstore.tier2.chunk_storage import ChunkStorage
from segmentstore.tier2.errors import InvalidManifestError, ManifestConflictError
from segmentstore.tier2.layout import LAYOUT_1_PREFIX, manifest_key
from segmentstore.tier2.manifest import ChunkInfo, SegmentManifest

_LAYOUT_1_MANIFEST = "manifest.json"
_PIECE = 8 << 20  # chunk bytes read at a time while checksumming
_LAYOUT_1_FIELDS = {
    "format_version",
    "name",
    "segment_id",
    "version",
    "owner_epoch",
    "start_offset",
    "storage_length",
    "sealed",
    "chunks",
}


@dataclass
class MigrationReport:
    migrated: int = 0
    already: int = 0  # a layout-2 manifest was there (a run cut short, or done by hand)
    unreadable: list[str] | None = None


def holds_layout_1(storage: ChunkStorage) -> bool:
    """Whether the location still holds a layout-1 manifest."""
    return any(True for _ in _layout_1_manifests(storage, limit=1))


def migrate_layout(
    storage: ChunkStorage,
    progress: Callable[[int], None] = lambda done: None,
    block_bytes: int = 64 * 1024,
) -> MigrationReport:
    """Migrate every layout-1 manifest of ``storage`` (module doc), checksumming chunks in
    blocks of ``block_bytes``; ``progress`` hears how many are done, every thousand."""
    report = MigrationReport(unreadable=[])
    for key in _layout_1_manifests(storage):
        found = storage.get(key)
        if found is None:
            continue
        try:
            manifest = _parse_layout_1(key, found[0])
        except InvalidManifestError as error:
            assert report.unreadable is not None
            report.unreadable.append(f"{key}: {error.reason}")
            continue
        for chunk in manifest.chunks:
            _checksum(storage, chunk, block_bytes)
        try:
            storage.put_if(manifest_key(manifest.name), manifest.to_json(), None)
            report.migrated += 1
        except ManifestConflictError:
            report.already += 1
        storage.delete(key)
        done = report.migrated + report.already
        if done % 1000 == 0:
            progress(done)
    return report


def _checksum(storage: ChunkStorage, chunk: ChunkInfo, block_bytes: int) -> None:
    """Give ``chunk`` an index with checksums if it has none (keeping its boundaries)."""
    index = load_chunk_index(storage, chunk)
    if index.checksummed:
        return
    builder = ChunkIndexBuilder(chunk.start_offset, block_bytes)
    records = [builder.add([], [(e.offset, e.time_ms) for e in index.boundaries])]
    for start in range(0, chunk.length, _PIECE):
        piece = storage.read(chunk.key, start, min(_PIECE, chunk.length - start))
        records.append(builder.add([piece]))
    key = index_object_key(chunk)
    storage.delete(key)  # the layout-1 sidecar (boundaries only), now in the new index
    storage.create(key, records)


def _layout_1_manifests(storage: ChunkStorage, limit: int | None = None) -> Iterator[str]:
    start = None
    while True:
        keys = storage.list(LAYOUT_1_PREFIX, start, 1000)
        for key in keys:
            parts = key.split("/")
            if len(parts) == 3 and parts[2] == _LAYOUT_1_MANIFEST:
                yield key
                if limit is not None:
                    limit -= 1
                    if not limit:
                        return
        if len(keys) < 1000:
            return
        start = keys[-1]


def _parse_layout_1(key: str, data: bytes) -> SegmentManifest:
    try:
        document = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InvalidManifestError(key, f"not JSON: {e}") from e
    if not isinstance(document, dict) or document.keys() != _LAYOUT_1_FIELDS:
        raise InvalidManifestError(key, "not a layout-1 manifest")
    if document["format_version"] != 1 or not isinstance(document["chunks"], list):
        raise InvalidManifestError(key, "not a layout-1 manifest")
    try:
        return SegmentManifest(
            name=document["name"],
            chunks=tuple(
                ChunkInfo(c["key"], c["start_offset"], c["length"]) for c in document["chunks"]
            ),
            storage_length=document["storage_length"],
            start_offset=document["start_offset"],
            sealed=document["sealed"],
            owner_epoch=document["owner_epoch"],
            version=document["version"],
            segment_id=document["segment_id"],
        )
    except (KeyError, TypeError) as e:
        raise InvalidManifestError(key, f"a chunk entry is malformed: {e}") from e
    except InvalidManifestError as e:
        raise InvalidManifestError(key, e.reason) from e
