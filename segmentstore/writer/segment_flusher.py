"""What one segment looks like in Tier 2, and the steps that bring Tier 2 up to date with it.

Every step writes chunk bytes first and replaces the manifest after, so a reader that trusts
only the manifest never sees bytes that are not durable; every step is idempotent, so replay
after a crash repeats it harmlessly. Chunks are written by one owner epoch only: a new epoch
never appends to an older epoch's chunk (bytes past the manifest there may be a torn write),
it starts a new one. All methods block: call them from a worker thread.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence

from segmentstore.logs.operations import Buffer
from segmentstore.tier2 import (
    ChunkExistsError,
    ChunkIndexBuilder,
    ChunkInfo,
    ChunkStorage,
    ManifestStore,
    SegmentManifest,
    SegmentState,
    chunk_key,
)
from segmentstore.tier2.chunk_index import (
    INLINE_INDEX_BYTES,
    index_object_key,
    retime_index,
    retimed_inline,
)


@dataclasses.dataclass(slots=True)
class _OpenChunk:
    """The last chunk, written by this epoch, that later writes may still append to."""

    key: str
    size: int  # its actual size in storage
    index: ChunkIndexBuilder  # the checksums and boundaries of its bytes so far
    index_size: int | None  # its index object's size; None while it has none
    opened: float  # time.monotonic() when it was created


class SegmentFlusher:
    """Tier 2 state of one segment incarnation (``segment_id``), owned by epoch ``epoch``."""

    def __init__(
        self,
        storage: ChunkStorage,
        manifests: ManifestStore,
        name: str,
        segment_id: int,
        epoch: int,
        max_chunk_bytes: int,
        max_chunk_age_ms: int,
        checksum_block_bytes: int,
    ) -> None:
        self._storage = storage
        self._block_bytes = checksum_block_bytes
        self._manifests = manifests
        self.name = name
        self.segment_id = segment_id
        self._epoch = epoch
        self._max_chunk = max_chunk_bytes
        self._max_chunk_age_s = max_chunk_age_ms / 1000
        self.manifest: SegmentManifest | None = None
        # Whether ``manifest`` is what Tier 2 holds (None then means none): read, or known
        # from a segment created since, whose manifest this flusher is the first to write.
        self.known = False
        self._token: str | None = None
        self._open_chunk: _OpenChunk | None = None
        # The segment's state for the next save (the writer sets it before each step), the
        # sequence number of the last operation it includes, and that of the state saved last.
        self.state: SegmentState | None = None
        self.state_sequence = -1
        self.saved_sequence = -1

    # -- state ----------------------------------------------------------------------------

    def load(self) -> SegmentManifest | None:
        """Read the manifest; one of an older incarnation of the name counts as none. What
        is read is made durable first: the writer trusts it to free Tier 1 (its storage
        length) and to let the segment leave memory (its state), and an owner killed between
        saving it and syncing its name left one that a power loss would take back."""
        loaded = self._manifests.load(self.name)
        self.saved_sequence = -1
        self.known = True
        if loaded is None or loaded[0].segment_id != self.segment_id:
            self.manifest, self._token = None, None
            return None
        self._manifests.make_durable(self.name)
        self.manifest, self._token = loaded
        return self.manifest

    @property
    def complete(self) -> bool:
        """Whether the manifest keeps all of the segment as of ``state_sequence``: its state
        was saved at that point, and every byte of it is in Tier 2."""
        return (
            self.manifest is not None
            and self.manifest.complete
            and self.saved_sequence >= self.state_sequence
        )

    @property
    def storage_length(self) -> int:
        return 0 if self.manifest is None else self.manifest.storage_length

    @property
    def start_offset(self) -> int:
        return 0 if self.manifest is None else self.manifest.start_offset

    def _save(self, manifest: SegmentManifest) -> None:
        try:
            self._token = self._manifests.save(manifest, self._token, self._epoch)
        except BaseException:
            # The save may have landed all the same (a timeout after S3 took it): until the
            # manifest is read again, nothing here may be trusted, least of all that a chunk
            # key no manifest names is free to be replaced.
            self.manifest, self._token, self._open_chunk = None, None, None
            self.known = False
            raise
        # What save stored: our epoch, and one version above the manifest it replaced.
        previous = 0 if self.manifest is None else self.manifest.version
        self.manifest = dataclasses.replace(manifest, owner_epoch=self._epoch, version=previous + 1)
        self.saved_sequence = self.state_sequence

    def save_state(self) -> None:
        """Make the manifest keep ``state`` (writing it only if it keeps another): the last
        step before the segment may leave memory."""
        if self.manifest is not None and self.manifest.state == self.state:
            self.saved_sequence = self.state_sequence
            return
        self._save(self._base())

    def _base(self) -> SegmentManifest:
        """The manifest the next save starts from: the current one with the current state
        (none if no state was given: a save must not keep a state older than its bytes)."""
        if self.manifest is not None:
            if self.manifest.state == self.state:
                return self.manifest
            return dataclasses.replace(self.manifest, state=self.state)
        return SegmentManifest(
            name=self.name,
            segment_id=self.segment_id,
            chunks=(),
            storage_length=0,
            start_offset=0,
            sealed=False,
            owner_epoch=self._epoch,
            version=0,
            state=self.state,
        )

    # -- steps ----------------------------------------------------------------------------

    def skip_to(self, start_offset: int) -> None:
        """Bytes below ``start_offset`` are truncated before they ever reached Tier 2."""
        base = self._base()
        if start_offset <= base.storage_length:
            return
        self._save(
            dataclasses.replace(
                base, chunks=(), storage_length=start_offset, start_offset=start_offset
            )
        )
        self._open_chunk = None
        self._delete_chunks(base.chunks)

    def write(
        self,
        offset: int,
        parts: Sequence[Buffer],
        length: int,
        entries: Sequence[tuple[int, int]] = (),
    ) -> None:
        """Put ``length`` bytes at ``offset`` (== storage_length) into a chunk, and their
        checksums and time index ``entries`` into its index, then the manifest. ``length``
        must fit in :meth:`room`."""
        base = self._base()
        if offset != base.storage_length:
            raise AssertionError(
                f"{self.name}: write at {offset}, Tier 2 has {base.storage_length}"
            )
        chunks = list(base.chunks)
        open_chunk = self._appendable()
        try:
            if open_chunk is not None and chunks and chunks[-1].key == open_chunk.key:
                self._storage.append(open_chunk.key, open_chunk.size, parts)
                open_chunk.size += length
                chunks[-1] = dataclasses.replace(chunks[-1], length=chunks[-1].length + length)
            else:
                if chunks and chunks[-1].index is not None:
                    chunks[-1] = self._spill_index(chunks[-1])  # no longer the last chunk
                key = chunk_key(self.name, offset, self._epoch, self.segment_id)
                _create_anew(self._storage, key, parts)
                chunks.append(ChunkInfo(key, offset, length, b""))
                index = ChunkIndexBuilder(offset, self._block_bytes)
                open_chunk = _OpenChunk(key, length, index, None, time.monotonic())
            chunks[-1], open_chunk.index_size = self._add_index(
                chunks[-1], open_chunk.index.add(parts, entries), open_chunk.index_size
            )
            self._open_chunk = open_chunk if self._storage.supports_append else None
            self._save(
                dataclasses.replace(
                    base, chunks=tuple(chunks), storage_length=offset + length,
                    owner_epoch=self._epoch,
                )
            )  # fmt: skip
        except BaseException:
            self._open_chunk = None  # its size on disk is no longer known for sure
            # ... nor is the manifest: a save reported failed may have landed, and the next
            # step must not take the chunks it names for unnamed leftovers (_create_anew).
            self.manifest, self._token, self.known = None, None, False
            raise

    def _add_index(
        self, chunk: ChunkInfo, records: bytes, index_size: int | None
    ) -> tuple[ChunkInfo, int | None]:
        """Add ``records`` to the index of the last ``chunk``: in the manifest while it stays
        small (``chunk.index`` is not None), else in its object. The chunk entry and its index
        object's size (None: it has none) after that."""
        if chunk.index is not None:
            inline = chunk.index + records
            if len(inline) <= INLINE_INDEX_BYTES:
                return dataclasses.replace(chunk, index=inline), None
            records, chunk = inline, dataclasses.replace(chunk, index=None)  # grown: an object
        key = index_object_key(chunk)
        if index_size is None:
            _create_anew(self._storage, key, [records])
            return chunk, len(records)
        self._storage.append(key, index_size, [records])
        return chunk, index_size + len(records)

    def _spill_index(self, chunk: ChunkInfo) -> ChunkInfo:
        """The entry of ``chunk`` with its index moved from the manifest to its object."""
        assert chunk.index is not None
        _create_anew(self._storage, index_object_key(chunk), [chunk.index])
        return dataclasses.replace(chunk, index=None)

    def _appendable(self) -> _OpenChunk | None:
        """The open chunk, unless it is full or old enough to roll (so that retention can
        delete it whole once everything in it has expired)."""
        open_chunk = self._open_chunk
        if open_chunk is None:
            return None
        if (
            open_chunk.size >= self._max_chunk
            or time.monotonic() - open_chunk.opened >= self._max_chunk_age_s
        ):
            self._open_chunk = None
            return None
        return open_chunk

    def room(self) -> int:
        """How many bytes the next :meth:`write` may take."""
        open_chunk = self._appendable()
        if open_chunk is not None:
            return self._max_chunk - open_chunk.size
        return self._max_chunk  # the next write rolls to a new chunk

    def seal(self) -> None:
        base = self._base()
        if not base.sealed:
            self._save(dataclasses.replace(base, sealed=True))
        self._open_chunk = None

    def truncate(self, start_offset: int) -> None:
        """Record the new start and delete the chunks wholly below it."""
        base = self._base()
        if start_offset > base.storage_length:
            self.skip_to(start_offset)
            return
        if start_offset <= base.start_offset:
            return
        dropped = tuple(c for c in base.chunks if c.start_offset + c.length <= start_offset)
        kept = base.chunks[len(dropped) :]
        self._save(dataclasses.replace(base, chunks=kept, start_offset=start_offset))
        self._delete_chunks(dropped)

    def absorb(self, at_offset: int, source: SegmentManifest, time_ms: int) -> None:
        """Append a merged source's chunks (kept where they are) to this manifest at
        ``at_offset``, which must be this segment's storage length. To this segment the merge
        is one append made at ``time_ms``: the chunks' time indexes are rewritten with it, so
        that times never go back along the segment (checksums are kept as they are)."""
        base = self._base()
        if base.storage_length != at_offset:
            raise AssertionError(
                f"{self.name}: merge at {at_offset}, Tier 2 has {base.storage_length}"
            )
        chunks = list(base.chunks)
        if source.chunks and chunks and chunks[-1].index is not None:
            chunks[-1] = self._spill_index(chunks[-1])  # no longer the last chunk
        moved = []
        for chunk in source.chunks:
            if chunk.index is None:
                retime_index(self._storage, chunk, time_ms)
            else:  # re-timed as it moves to its object: the target keeps no adopted index
                chunk = self._spill_index(
                    dataclasses.replace(chunk, index=retimed_inline(chunk, time_ms))
                )
            moved.append(ChunkInfo(chunk.key, chunk.start_offset + at_offset, chunk.length))
        self._save(
            dataclasses.replace(
                base,
                chunks=(*chunks, *moved),
                storage_length=at_offset + source.storage_length,
            )
        )
        self._open_chunk = None

    def forget_manifest(self) -> None:
        """Delete the manifest but not the chunks: a merge target's manifest names them now."""
        self._manifests.delete(self.name)
        self.manifest, self._token = None, None

    def delete(self) -> None:
        """Delete the chunks and then the manifest of this incarnation."""
        if self.load() is None:
            return
        assert self.manifest is not None
        self._delete_chunks(self.manifest.chunks)
        self._manifests.delete(self.name)
        self.manifest, self._token = None, None

    def _delete_chunks(self, chunks: Sequence[ChunkInfo]) -> None:
        for chunk in chunks:
            self._storage.delete(chunk.key)
            self._storage.delete(index_object_key(chunk))


def _create_anew(storage: ChunkStorage, key: str, parts: Sequence[Buffer]) -> None:
    try:
        storage.create(key, parts)
    except ChunkExistsError:
        # Only a failed earlier attempt of this very step (same incarnation, epoch and offset)
        # can have left it, and no manifest names it: replace it.
        storage.delete(key)
        storage.create(key, parts)
