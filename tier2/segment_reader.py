"""Reading segments from Tier 2 through their manifests alone, without the service.

This is what ``segmentstore tier2 ls|cat`` and the Spark jobs use. A read never consults a
listing: the manifest names the chunks, and a chunk it names that is missing is an error, not a
gap. ``list_segments`` lists only to find the manifests.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

from segmentstore.tier2.chunk_storage import ChunkStorage, check_range
from segmentstore.tier2.errors import (
    ChunkNotFoundError,
    InvalidManifestError,
    ManifestNotFoundError,
)
from segmentstore.tier2.layout import SEGMENTS_PREFIX, is_manifest_key
from segmentstore.tier2.manifest import (
    ChunkInfo,
    ManifestStore,
    SegmentManifest,
    claimed_name,
    parse_manifest,
)
from segmentstore.tier2.time_index import TimeIndexEntry, read_time_index


@dataclass(frozen=True, slots=True)
class UnreadableManifest:
    """A manifest object that does not parse or breaks an invariant. ``name`` is the segment
    it belongs to when the damaged document still says so (checked against the key), else
    None: the key alone, a hash, does not tell."""

    key: str
    name: str | None
    reason: str


class SegmentReader:
    """Reads over one chunk storage. Blocking, like the storage under it; thread-safe."""

    def __init__(self, storage: ChunkStorage) -> None:
        self._storage = storage
        self._manifests = ManifestStore(storage)

    def read(self, name: str, offset: int, length: int) -> bytes:
        """The bytes of ``[offset, offset + length)`` clamped to ``[start_offset, storage_length)``
        of the segment's current manifest: they begin at ``max(offset, start_offset)`` and may be
        fewer than asked, or none.

        ``ManifestNotFoundError`` if the segment has no manifest; ``ChunkNotFoundError`` naming
        the chunk and the segment if a chunk the manifest names is missing.
        """
        loaded = self._manifests.load(name)
        if loaded is None:
            raise ManifestNotFoundError(name)
        return self.read_from(loaded[0], offset, length)

    def read_from(self, manifest: SegmentManifest, offset: int, length: int) -> bytes:
        """:meth:`read` through a manifest the caller already holds (one consistent snapshot for
        many reads, as a Spark job plans them)."""
        check_range(offset, length)
        start = max(offset, manifest.start_offset)
        end = min(offset + length, manifest.storage_length)
        if start >= end:
            return b""
        first = bisect_right(manifest.chunks, start, key=lambda c: c.start_offset) - 1
        pieces = []
        for chunk in manifest.chunks[first:]:
            if chunk.start_offset >= end:
                break
            low, high = max(start, chunk.start_offset), min(end, chunk.end_offset)
            if low >= high:
                continue  # an empty chunk
            try:
                pieces.append(self._storage.read(chunk.key, low - chunk.start_offset, high - low))
            except ChunkNotFoundError as e:
                raise ChunkNotFoundError(chunk.key, manifest.name) from e
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)

    def time_index(self, chunk: ChunkInfo) -> list[TimeIndexEntry]:
        """The append boundaries (and their times) that ``chunk``'s sidecar records inside it,
        in offset order; none if it has no sidecar (:mod:`segmentstore.tier2.time_index`)."""
        return read_time_index(self._storage, chunk)

    def holds_any_segment(self) -> bool:
        """Whether this Tier 2 location has at least one segment manifest."""
        return any(is_manifest_key(key) for key in self._storage.list(SEGMENTS_PREFIX))

    def list_names(
        self, prefix: str = "", *, after: str | None = None, limit: int | None = None
    ) -> list[str]:
        """The names of the segments whose manifests are here, that start with ``prefix`` and
        sort after ``after``, in code point order, at most ``limit`` of them (None: all)."""
        names = sorted(
            m.name
            for m in self.list_segments(prefix)
            if after is None or m.name > after
        )
        return names if limit is None else names[:limit]

    def list_segments(self, prefix: str = "") -> list[SegmentManifest]:
        """The manifests of every segment whose name starts with ``prefix``, sorted by name.

        Names come from the manifests (keys are hashes). A segment deleted while listing is
        left out; a manifest that does not parse raises ``InvalidManifestError``.
        """
        found, unreadable = self.scan_segments(prefix)
        if unreadable:
            raise InvalidManifestError(unreadable[0].key, unreadable[0].reason)
        return found

    def scan_segments(
        self, prefix: str = ""
    ) -> tuple[list[SegmentManifest], list[UnreadableManifest]]:
        """:meth:`list_segments` that goes on past damaged manifests: the readable manifests
        whose names start with ``prefix``, sorted by name, and every unreadable one that
        belongs to such a name or whose name is unknown, sorted by key."""
        found, unreadable = [], []
        for key in self._storage.list(SEGMENTS_PREFIX):
            if not is_manifest_key(key):
                continue
            loaded = self._storage.get(key)
            if loaded is None:
                continue
            try:
                manifest = parse_manifest(key, loaded[0])
            except InvalidManifestError as e:
                name = claimed_name(key, loaded[0])
                if name is None or name.startswith(prefix):
                    unreadable.append(UnreadableManifest(key, name, e.reason))
                continue
            if manifest.name.startswith(prefix):
                found.append(manifest)
        return sorted(found, key=lambda m: m.name), sorted(unreadable, key=lambda u: u.key)
