"""Reading segments from Tier 2 through their manifests alone, without the service.

This is what ``segmentstore tier2 ls|cat`` and the Spark jobs use. A read never consults a
listing: the manifest names the chunks, and a chunk it names that is missing is an error, not a
gap. Listing by prefix lists only the manifests it selects: their keys spell the names.
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
from segmentstore.tier2.layout import (
    NAMES_PREFIX,
    is_spellable,
    longest_spellable_prefix,
    manifest_key,
    manifests_under,
    name_of,
)
from segmentstore.tier2.manifest import (
    ChunkInfo,
    ManifestStore,
    SegmentManifest,
    parse_manifest,
)
from segmentstore.tier2.time_index import TimeIndexEntry, read_time_index


@dataclass(frozen=True, slots=True)
class UnreadableManifest:
    """A manifest object that does not parse or breaks an invariant; ``name`` is the segment
    it belongs to (its key spells it)."""

    key: str
    name: str
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
        return bool(self._storage.list(NAMES_PREFIX, limit=1))

    def list_names(
        self, prefix: str = "", *, after: str | None = None, limit: int | None = None
    ) -> list[str]:
        """The names of the segments whose manifests are here, that start with ``prefix`` and
        sort after ``after``, in code point order, at most ``limit`` of them (None: all).
        Reads no manifest: their keys spell the names."""
        if not is_spellable(prefix):
            return []  # no segment name holds such a character
        names: list[str] = []
        cursor = None
        if after is not None:
            # Names after ``after`` come after its longest prefix that a name can spell.
            spellable = longest_spellable_prefix(after)
            cursor = manifest_key(spellable) if spellable else None
        while limit is None or len(names) < limit:
            wanted = None if limit is None else limit - len(names)
            keys = self._storage.list(manifests_under(prefix), cursor, wanted)
            for key in keys:
                name = name_of(key)
                if name is not None and (after is None or name > after):
                    names.append(name)
            if wanted is None or len(keys) < wanted:
                break
            cursor = keys[-1]
        return names

    def list_segments(self, prefix: str = "") -> list[SegmentManifest]:
        """The manifests of every segment whose name starts with ``prefix``, sorted by name.

        A segment deleted while listing is left out; a manifest that does not parse raises
        ``InvalidManifestError``.
        """
        found, unreadable = self.scan_segments(prefix)
        if unreadable:
            raise InvalidManifestError(unreadable[0].key, unreadable[0].reason)
        return found

    def scan_segments(
        self, prefix: str = ""
    ) -> tuple[list[SegmentManifest], list[UnreadableManifest]]:
        """:meth:`list_segments` that goes on past damaged manifests: the readable manifests
        whose names start with ``prefix``, and every unreadable one, each sorted by name."""
        found, unreadable = [], []
        for key in self._storage.list(manifests_under(prefix)):
            name = name_of(key)
            if name is None:
                continue
            loaded = self._storage.get(key)
            if loaded is None:
                continue  # deleted while we listed
            try:
                found.append(parse_manifest(key, loaded[0]))
            except InvalidManifestError as e:
                unreadable.append(UnreadableManifest(key, name, e.reason))
        return found, unreadable
