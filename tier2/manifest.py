"""A segment's manifest: the one document that says which chunks hold its Tier 2 bytes.

Readers trust the manifest alone, never a listing. It is replaced atomically with
``ChunkStorage.put_if`` and only after the chunks it names are durable, so whoever reads it finds
every byte of ``[start_offset, storage_length)`` in its chunks. The JSON document is described in
``docs/formats.md`` (Tier 2 section).

Ownership: every save is tagged with the saving owner's epoch (``owner_epoch``) and is
conditional on the version token the owner last read. An owner whose epoch is below the stored
``owner_epoch`` is fenced: :meth:`ManifestStore.save` refuses it with ``FencedError`` and it must
stop writing that segment.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, replace
from typing import Any, NoReturn

from segmentstore.tier2.chunk_storage import ChunkStorage, check_key
from segmentstore.tier2.errors import FencedError, InvalidManifestError, ManifestConflictError
from segmentstore.tier2.layout import manifest_key
from segmentstore.tier2.segment_state import SegmentState

FORMAT_VERSION = 2
_FIELDS = {
    "format_version",
    "name",
    "segment_id",
    "version",
    "owner_epoch",
    "start_offset",
    "storage_length",
    "sealed",
    "chunks",
    "state",
}
_CHUNK_FIELDS = {"key", "start_offset", "length"}
_CHUNK_OPTIONAL = {"index"}


@dataclass(frozen=True, slots=True)
class ChunkInfo:
    """The object ``key`` holds the segment's bytes ``[start_offset, start_offset + length)``.
    ``index`` is the chunk's index (:mod:`segmentstore.tier2.chunk_index`) when the manifest
    keeps it itself, as it does for a segment's last chunk while that index is small: a small
    segment is then its chunk and its manifest, two objects. None: it is an object of its own."""

    key: str
    start_offset: int
    length: int
    index: bytes | None = None

    @property
    def end_offset(self) -> int:
        return self.start_offset + self.length


@dataclass(frozen=True, slots=True)
class SegmentManifest:
    """What Tier 2 holds of segment ``name``; validated on construction.

    Invariants (``InvalidManifestError`` otherwise): ``chunks`` are contiguous and in order, the
    last ends at ``storage_length``, ``start_offset <= storage_length``, and the first chunk
    starts at or below ``start_offset`` (chunks wholly below it may already be dropped from the
    list; with no chunks, ``start_offset == storage_length``). ``version`` counts saves;
    ``owner_epoch`` is the epoch of the owner that saved it last.
    """

    name: str
    chunks: tuple[ChunkInfo, ...]
    storage_length: int
    start_offset: int
    sealed: bool
    owner_epoch: int
    version: int
    # Which incarnation of the name this is (names can be deleted and created again): a late
    # cleanup of an older incarnation must recognise and spare a newer one's objects.
    segment_id: int = 0
    # The rest of the segment's state as of this save (None: the manifest keeps only bytes):
    # what the service loads a segment back from after evicting it.
    state: SegmentState | None = None
    format_version: int = FORMAT_VERSION

    @property
    def complete(self) -> bool:
        """Whether the segment can be served again from this manifest alone: it keeps the
        segment's state, and every byte of the segment is in Tier 2."""
        return self.state is not None and self.state.length == self.storage_length

    def __post_init__(self) -> None:
        _validate(self)

    def to_json(self) -> bytes:
        document = {
            "format_version": self.format_version,
            "name": self.name,
            "segment_id": self.segment_id,
            "version": self.version,
            "owner_epoch": self.owner_epoch,
            "start_offset": self.start_offset,
            "storage_length": self.storage_length,
            "sealed": self.sealed,
            "chunks": [_chunk_document(c) for c in self.chunks],
            "state": None if self.state is None else self.state.to_document(),
        }
        return json.dumps(document, separators=(",", ":")).encode("utf-8")

    @staticmethod
    def from_json(data: bytes) -> SegmentManifest:
        """Parse and validate a document; ``InvalidManifestError`` if it is not a manifest."""
        try:
            document = json.loads(data)
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise InvalidManifestError("", f"not JSON: {e}") from e
        _check_fields(document, _FIELDS, "the manifest")
        chunks = document["chunks"]
        if not isinstance(chunks, list):
            raise InvalidManifestError("", "chunks is not a list")
        for chunk in chunks:
            _check_fields(chunk, _CHUNK_FIELDS, "a chunk", _CHUNK_OPTIONAL)
        return SegmentManifest(
            name=document["name"],
            chunks=tuple(_chunk(c) for c in chunks),
            storage_length=document["storage_length"],
            start_offset=document["start_offset"],
            sealed=document["sealed"],
            owner_epoch=document["owner_epoch"],
            version=document["version"],
            segment_id=document["segment_id"],
            state=None
            if document["state"] is None
            else SegmentState.from_document(document["state"]),
            format_version=document["format_version"],
        )


class ManifestStore:
    """Load and save manifests in a chunk storage. Blocking, like the storage under it."""

    def __init__(self, storage: ChunkStorage) -> None:
        self._storage = storage

    def load(self, name: str) -> tuple[SegmentManifest, str] | None:
        """The manifest of ``name`` and its version token, or None if it has none."""
        return self._load(manifest_key(name), name)

    def save(self, manifest: SegmentManifest, previous_token: str | None, epoch: int) -> str:
        """Store ``manifest`` as the owner of ``epoch`` and return the new version token.

        The document written is ``manifest`` with ``owner_epoch = epoch`` and ``version`` one
        above the stored one (1 for a new manifest). It replaces the stored one only if that
        still has ``previous_token`` (None: only if there is none), else
        ``ManifestConflictError``; ``FencedError`` if the stored one belongs to a higher epoch
        (checked before writing, and again after a conflict, so that a fenced owner learns it
        is fenced rather than retrying).
        """
        if epoch < 0:
            raise ValueError(f"epoch {epoch} is negative")
        key = manifest_key(manifest.name)
        version = 1
        if previous_token is not None:
            # A new manifest needs no look first: if there is one, the put fails and the look
            # after it tells a newer owner's (fenced) from a lost race.
            current = self._load(key, manifest.name)
            if current is not None and current[0].owner_epoch > epoch:
                raise FencedError(manifest.name, epoch, current[0].owner_epoch)
            version = current[0].version + 1 if current is not None else 1
        document = replace(manifest, owner_epoch=epoch, version=version).to_json()
        try:
            return self._storage.put_if(key, document, previous_token)
        except ManifestConflictError as e:
            after = self._load(key, manifest.name)
            if after is not None and after[0].owner_epoch > epoch:
                raise FencedError(manifest.name, epoch, after[0].owner_epoch) from e
            raise

    def make_durable(self, name: str) -> None:
        """Make the manifest of ``name`` as it is seen now durable (ChunkStorage.make_durable):
        before trusting one that another owner wrote, perhaps just before it crashed."""
        self._storage.make_durable(manifest_key(name))

    def delete(self, name: str) -> None:
        """Remove the manifest of ``name`` (idempotent). Not fenced: the caller owns the name."""
        self._storage.delete(manifest_key(name))

    def _load(self, key: str, name: str) -> tuple[SegmentManifest, str] | None:
        found = self._storage.get(key)
        if found is None:
            return None
        data, token = found
        manifest = parse_manifest(key, data)
        if manifest.name != name:
            raise InvalidManifestError(
                key, f"it belongs to segment {manifest.name!r}, not {name!r}"
            )
        return manifest, token


def parse_manifest(key: str, data: bytes) -> SegmentManifest:
    """:meth:`SegmentManifest.from_json` of the object at ``key``, which must be the key of the
    manifest's own segment; errors name the key."""
    try:
        manifest = SegmentManifest.from_json(data)
    except InvalidManifestError as e:
        raise InvalidManifestError(key, e.reason) from e
    if manifest_key(manifest.name) != key:
        raise InvalidManifestError(
            key, f"it is the manifest of {manifest.name!r}, stored elsewhere"
        )
    return manifest


def _state(document: Any) -> SegmentState | None:
    return None if document is None else SegmentState.from_document(document)


def _chunk_document(chunk: ChunkInfo) -> dict[str, Any]:
    document: dict[str, Any] = {
        "key": chunk.key,
        "start_offset": chunk.start_offset,
        "length": chunk.length,
    }
    if chunk.index is not None:
        document["index"] = base64.b64encode(chunk.index).decode("ascii")
    return document


def _chunk(document: dict[str, Any]) -> ChunkInfo:
    index = document.get("index")
    if index is not None:
        if not isinstance(index, str):
            raise InvalidManifestError("", "a chunk's index is not base64 text")
        try:
            index = base64.b64decode(index, validate=True)
        except ValueError as e:
            raise InvalidManifestError("", f"a chunk's index is not base64: {e}") from e
    return ChunkInfo(document["key"], document["start_offset"], document["length"], index)


def _check_fields(
    document: Any, fields: set[str], what: str, optional: set[str] | None = None
) -> None:
    if not isinstance(document, dict):
        raise InvalidManifestError("", f"{what} is not a JSON object")
    allowed = fields | (optional or set())
    if (missing := fields - document.keys()) or (unknown := document.keys() - allowed):
        problem = f"lacks {sorted(missing)}" if missing else f"has unknown fields {sorted(unknown)}"
        raise InvalidManifestError("", f"{what} {problem}")


def _validate(m: SegmentManifest) -> None:
    def fail(reason: str) -> NoReturn:
        raise InvalidManifestError("", reason)

    if type(m.format_version) is not int or m.format_version != FORMAT_VERSION:
        fail(f"format version {m.format_version!r} is not {FORMAT_VERSION}")
    if not isinstance(m.name, str) or not m.name:
        fail("the segment name must be a non-empty string")
    for field in ("storage_length", "start_offset", "owner_epoch", "version", "segment_id"):
        value = getattr(m, field)
        if type(value) is not int or value < 0:
            fail(f"{field} must be a non-negative integer, not {value!r}")
    if m.state is not None and not isinstance(m.state, SegmentState):
        fail(f"state {m.state!r} is not a SegmentState")
    if m.state is not None and m.state.length < m.storage_length:
        fail(f"the state's length {m.state.length} is below the storage length")
    if type(m.sealed) is not bool:
        fail(f"sealed must be true or false, not {m.sealed!r}")
    if not isinstance(m.chunks, tuple):
        fail("chunks must be a tuple of ChunkInfo")
    if m.start_offset > m.storage_length:
        fail(f"start offset {m.start_offset} is beyond storage length {m.storage_length}")
    keys = set()
    for chunk in m.chunks:
        if not isinstance(chunk, ChunkInfo):
            fail(f"{chunk!r} is not a ChunkInfo")
        if not isinstance(chunk.key, str):
            fail(f"chunk key {chunk.key!r} is not a string")
        try:
            check_key(chunk.key)
        except ValueError:
            fail(f"chunk key {chunk.key!r} is not a valid key")
        for field in ("start_offset", "length"):
            value = getattr(chunk, field)
            if type(value) is not int or value < 0:
                fail(f"chunk {chunk.key}: {field} must be a non-negative integer, not {value!r}")
        if chunk.key in keys:
            fail(f"chunk {chunk.key} is listed twice")
        keys.add(chunk.key)
    for before, after in zip(m.chunks, m.chunks[1:], strict=False):
        if before.end_offset != after.start_offset:
            fail(
                f"chunk {after.key} starts at {after.start_offset}, "
                f"but the chunk before it ends at {before.end_offset}"
            )
    if not m.chunks:
        if m.start_offset != m.storage_length:
            fail(f"no chunks, but bytes [{m.start_offset}, {m.storage_length}) should be in Tier 2")
        return
    if m.chunks[-1].end_offset != m.storage_length:
        fail(f"the last chunk ends at {m.chunks[-1].end_offset}, not at {m.storage_length}")
    if m.chunks[0].start_offset > m.start_offset:
        fail(
            f"the first chunk starts at {m.chunks[0].start_offset}, "
            f"above the start offset {m.start_offset}"
        )
