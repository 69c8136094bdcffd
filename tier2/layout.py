"""Where a segment's objects live in Tier 2: keys derived from its name, never the name itself.

::

    segments/<h>/manifest.json                              the segment's manifest
    segments/<h>/chunk-<start offset, 20 digits>-e<epoch, 10 digits>
    segments/<h>/chunk-...-e....tidx                        its time index sidecar

``<h>`` is the first 32 hex digits (128 bits) of SHA-256 over the name's UTF-8 bytes. No part of
a name is used raw, so no name (``../x``, ``a/../../etc``, 255 characters, ``#transaction.``)
can address anything outside its own prefix, and every prefix has the same length. The
manifest repeats the name, so a reader can tell a hash collision from its own segment. Zero
padding makes chunk keys sort by start offset.
"""

from __future__ import annotations

import hashlib

SEGMENTS_PREFIX = "segments/"
MANIFEST_NAME = "manifest.json"
TIME_INDEX_SUFFIX = ".tidx"
_MAX_START_OFFSET = 10**20 - 1
_MAX_EPOCH = 10**10 - 1


def segment_key(name: str) -> str:
    """``segments/<32 hex digits>``: the prefix of every object of segment ``name``."""
    if not name:
        raise ValueError("a segment name is never empty")
    return SEGMENTS_PREFIX + hashlib.sha256(name.encode("utf-8")).hexdigest()[:32]


def chunk_key(name: str, start_offset: int, epoch: int, segment_id: int | None = None) -> str:
    """The key of the chunk of ``name`` that starts at ``start_offset``, written by ``epoch``
    for incarnation ``segment_id`` of the name (so that a new segment of a deleted name never
    reuses a key that a merge target may still name)."""
    if not 0 <= start_offset <= _MAX_START_OFFSET:
        raise ValueError(f"start offset {start_offset} out of range")
    if not 0 <= epoch <= _MAX_EPOCH:
        raise ValueError(f"epoch {epoch} out of range")
    key = f"{segment_key(name)}/chunk-{start_offset:020d}-e{epoch:010d}"
    if segment_id is None:
        return key
    if not 0 <= segment_id <= _MAX_EPOCH:
        raise ValueError(f"segment id {segment_id} out of range")
    return f"{key}-s{segment_id:010d}"


def manifest_key(name: str) -> str:
    return f"{segment_key(name)}/{MANIFEST_NAME}"


def time_index_key(chunk_key: str) -> str:
    """The sparse time index sidecar of a chunk (:mod:`segmentstore.tier2.time_index`)."""
    return chunk_key + TIME_INDEX_SUFFIX


def is_manifest_key(key: str) -> bool:
    """Whether ``key`` has the shape of a manifest key (``segments/<h>/manifest.json``)."""
    parts = key.split("/")
    return (
        len(parts) == 3
        and parts[0] + "/" == SEGMENTS_PREFIX
        and len(parts[1]) == 32
        and parts[2] == MANIFEST_NAME
    )
