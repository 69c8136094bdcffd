"""Reading segments from Tier 2 through their manifests alone, without the service.

This is what ``segmentstore tier2 ls|cat``, the store's cache-miss reads and the Tier 1
rebuild use. A read never consults a listing: the manifest names the chunks, and a chunk it
names that is missing is an error, not a gap. Listing by prefix lists only the manifests it
selects: their keys spell the names. Every byte read is verified against its chunk's checksums
(:mod:`segmentstore.tier2.chunk_index`) unless the reader was made with ``verify=False``.
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from segmentstore.tier2.chunk_index import (
    ChunkIndex,
    TimeIndexEntry,
    load_chunk_index,
    read_verified,
)
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

# A scan's memory of the manifests it read: key -> (its stamp then, the manifest).
ManifestsSeen = dict[str, tuple[str, "SegmentManifest"]]


@dataclass(frozen=True, slots=True)
class UnreadableManifest:
    """A manifest object that does not parse or breaks an invariant; ``name`` is the segment
    it belongs to (its key spells it)."""

    key: str
    name: str
    reason: str


# Chunk checksums kept for reads to come: a 64 MiB chunk's 256 blocks (at the default block
# size) take about 50 KB, so at most about 13 MB (boundaries are not kept: readers of those
# keep their own).
_KEPT_INDEXES = 256


class SegmentReader:
    """Reads over one chunk storage. Blocking, like the storage under it; thread-safe."""

    def __init__(self, storage: ChunkStorage, *, verify: bool = True) -> None:
        self._storage = storage
        self._manifests = ManifestStore(storage)
        self.verify = verify
        self._indexes: OrderedDict[str, ChunkIndex] = OrderedDict()
        self._lock = threading.Lock()

    def read(self, name: str, offset: int, length: int) -> bytes:
        """The bytes of ``[offset, offset + length)`` clamped to ``[start_offset, storage_length)``
        of the segment's current manifest: they begin at ``max(offset, start_offset)`` and may be
        fewer than asked, or none.

        ``ManifestNotFoundError`` if the segment has no manifest; ``ChunkNotFoundError`` naming
        the chunk and the segment if a chunk the manifest names is missing;
        ``ChunkCorruptedError`` naming the segment, the chunk and the range if bytes do not
        match their checksum (or are missing from a short chunk, or have none).
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
        return self.read_chunks(manifest.name, manifest.chunks, start, end)

    def read_chunks(self, name: str, chunks: Sequence[ChunkInfo], start: int, end: int) -> bytes:
        """Segment ``name``'s bytes ``[start, end)`` from ``chunks`` (in offset order, holding
        them all), verified unless this reader does not verify. ``ChunkRangeError`` if a chunk
        is shorter than it should be and the reader does not verify."""
        found = self.view_chunks(name, chunks, start, end)
        return found if isinstance(found, bytes) else bytes(found)

    def view_chunks(
        self, name: str, chunks: Sequence[ChunkInfo], start: int, end: int
    ) -> bytes | memoryview:
        """:meth:`read_chunks`, maybe as a view into a larger read (no copy: for readers that
        only parse the bytes, such as the Spark source)."""
        first = bisect_right(chunks, start, key=lambda c: c.start_offset) - 1
        pieces: list[bytes | memoryview] = []
        for chunk in chunks[max(first, 0) :]:
            if chunk.start_offset >= end:
                break
            low, high = max(start, chunk.start_offset), min(end, chunk.end_offset)
            if low >= high:
                continue  # an empty chunk
            try:
                if self.verify:
                    index = self.chunk_index(chunk)
                    pieces.append(read_verified(self._storage, index, name, low, high))
                else:
                    offset_in_chunk = low - chunk.start_offset
                    pieces.append(self._storage.read(chunk.key, offset_in_chunk, high - low))
            except ChunkNotFoundError as e:
                raise ChunkNotFoundError(chunk.key, name) from e
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)

    def chunk_index(self, chunk: ChunkInfo) -> ChunkIndex:
        """The checksums of ``chunk`` (its index without boundaries), loaded once while this
        chunk entry (and length) lasts."""
        with self._lock:
            kept = self._indexes.get(chunk.key)
            if kept is not None and kept.chunk == chunk:
                self._indexes.move_to_end(chunk.key)
                return kept
        index = load_chunk_index(self._storage, chunk, boundaries=False)
        with self._lock:
            self._indexes[chunk.key] = index
            while len(self._indexes) > _KEPT_INDEXES:
                self._indexes.popitem(last=False)
        return index

    def time_index(self, chunk: ChunkInfo) -> list[TimeIndexEntry]:
        """The append boundaries (and their times) that ``chunk``'s index records inside it,
        in offset order; none if it has no index (:mod:`segmentstore.tier2.chunk_index`)."""
        return list(load_chunk_index(self._storage, chunk).boundaries)

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
        self, prefix: str = "", *, seen: ManifestsSeen | None = None
    ) -> tuple[list[SegmentManifest], list[UnreadableManifest]]:
        """:meth:`list_segments` that goes on past damaged manifests: the readable manifests
        whose names start with ``prefix``, and every unreadable one, each sorted by name.

        ``seen`` keeps what an earlier scan read (a stream scans again every micro-batch): a
        manifest whose stamp in the listing has not changed since is not read again."""
        found, unreadable = [], []
        under = manifests_under(prefix)
        listed = (
            self._storage.list_stamped(under)
            if seen is not None
            else [(k, "") for k in self._storage.list(under)]
        )
        if seen is not None:  # forget the manifests that are gone
            listed_keys = {key for key, _ in listed}
            for key in [k for k in seen if k.startswith(under) and k not in listed_keys]:
                del seen[key]
        for key, stamp in listed:
            name = name_of(key)
            if name is None:
                continue
            if seen is not None and stamp and key in seen and seen[key][0] == stamp:
                found.append(seen[key][1])
                continue
            loaded = self._storage.get(key)
            if loaded is None:
                continue  # deleted while we listed
            try:
                manifest = parse_manifest(key, loaded[0])
            except InvalidManifestError as e:
                unreadable.append(UnreadableManifest(key, name, e.reason))
                continue
            found.append(manifest)
            if seen is not None and stamp:
                seen[key] = (stamp, manifest)
        return found, unreadable
