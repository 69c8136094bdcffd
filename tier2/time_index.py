"""The sparse time index beside each chunk: which append boundaries the chunk holds, and when
each of those appends was made.

A chunk's sidecar (key: :func:`segmentstore.tier2.layout.time_index_key`) is written with the
chunk's bytes and before the manifest that names them, so a reader that trusts the manifest finds
an entry for (about) every ``time_index_interval_bytes`` of the chunk's appends. It is an 8-byte
magic followed by fixed 16-byte entries, little-endian::

    "SSTIDX1\\n" | (offset in chunk u64, append time ms i64)*

Offsets are relative to the chunk, so a merge that moves a chunk into another segment keeps its
entries valid. Entries are in offset order and their times never decrease. Where an object may be
appended to, the sidecar grows with its chunk; after a crash it may hold entries past the length
that the manifest gives the chunk, or a torn last entry: readers drop both. A chunk without a
sidecar has no known boundaries (readers then fall back to coarser answers, never wrong ones).
Every entry's offset is an *append boundary*: a position where one append ended and the next
began, so truncating there never cuts an event written by ``:appendEvents``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import NamedTuple

from segmentstore.tier2.chunk_storage import ChunkStorage
from segmentstore.tier2.errors import ChunkNotFoundError, InvalidManifestError
from segmentstore.tier2.layout import time_index_key
from segmentstore.tier2.manifest import ChunkInfo

MAGIC = b"SSTIDX1\n"
ENTRY = struct.Struct("<Qq")


class TimeIndexEntry(NamedTuple):
    """The append that began at segment offset ``offset`` was made at ``time_ms``."""

    offset: int
    time_ms: int


def encode_entries(chunk_start: int, entries: Iterable[tuple[int, int]], *, first: bool) -> bytes:
    """Sidecar bytes for ``entries``, ``(offset, time_ms)`` pairs such as
    :class:`TimeIndexEntry` (segment offsets in the chunk that starts at ``chunk_start``);
    ``first`` adds the magic that begins a sidecar."""
    pack = ENTRY.pack
    body = b"".join([pack(offset - chunk_start, time_ms) for offset, time_ms in entries])
    return MAGIC + body if first else body


def decode_entries(key: str, data: bytes, chunk: ChunkInfo) -> list[TimeIndexEntry]:
    """The entries of sidecar ``data`` that lie inside ``chunk`` (as the manifest gives it)."""
    if not data.startswith(MAGIC):
        raise InvalidManifestError(key, "not a time index (bad magic)")
    whole = (len(data) - len(MAGIC)) // ENTRY.size * ENTRY.size  # drop a torn last entry
    entries = []
    for relative, time_ms in ENTRY.iter_unpack(memoryview(data)[len(MAGIC) : len(MAGIC) + whole]):
        if relative >= chunk.length:
            break  # written past what the manifest names: not part of the segment
        entries.append(TimeIndexEntry(chunk.start_offset + relative, time_ms))
    return entries


def read_time_index(storage: ChunkStorage, chunk: ChunkInfo) -> list[TimeIndexEntry]:
    """The time index entries of ``chunk`` in segment offsets; none if it has no sidecar."""
    key = time_index_key(chunk.key)
    try:
        size = storage.size(key)
        data = storage.read(key, 0, size)
    except ChunkNotFoundError:
        return []
    return decode_entries(key, data, chunk)
