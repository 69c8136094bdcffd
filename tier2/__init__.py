"""Tier 2: the final home of segment data, as chunks and manifests in a chunk storage.

A leaf package: May import: nothing of the project. The core talks to it through
:class:`ChunkStorage` (chosen by URI with :func:`open_chunk_storage`), :class:`ManifestStore`
and :class:`SegmentReader`, and translates :class:`Tier2Error` leaves at its boundary. Every call
blocks on I/O: call it from a worker thread, never from the event loop. The S3 and HDFS
adapters (boto3, pyarrow) are imported only when a URI asks for them. Keys and documents:
``docs/formats.md``, section Tier 2.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from segmentstore.tier2.chunk_index import (
    ChunkIndex,
    ChunkIndexBuilder,
    TimeIndexEntry,
    load_chunk_index,
    read_time_index,
    read_verified,
)
from segmentstore.tier2.chunk_storage import Buffer, ChunkStorage
from segmentstore.tier2.errors import (
    BadChunkOffsetError,
    ChunkCorruptedError,
    ChunkExistsError,
    ChunkNotFoundError,
    ChunkRangeError,
    FencedError,
    InvalidManifestError,
    InvalidTier2UriError,
    ManifestConflictError,
    ManifestNotFoundError,
    Tier2ClosedError,
    Tier2Error,
    Tier2IOError,
    Tier2UnavailableError,
)
from segmentstore.tier2.factory import open_chunk_storage
from segmentstore.tier2.file_storage import FileChunkStorage
from segmentstore.tier2.layout import (
    chunk_key,
    chunks_of,
    manifest_key,
    segment_key,
    time_index_key,
)
from segmentstore.tier2.manifest import ChunkInfo, ManifestStore, SegmentManifest
from segmentstore.tier2.segment_reader import ManifestsSeen, SegmentReader, UnreadableManifest
from segmentstore.tier2.segment_state import SegmentState

if TYPE_CHECKING:
    from segmentstore.tier2.hdfs_storage import HdfsChunkStorage
    from segmentstore.tier2.s3_storage import S3ChunkStorage

__all__ = [
    "BadChunkOffsetError",
    "Buffer",
    "ChunkCorruptedError",
    "ChunkExistsError",
    "ChunkIndex",
    "ChunkIndexBuilder",
    "ChunkInfo",
    "ChunkNotFoundError",
    "ChunkRangeError",
    "ChunkStorage",
    "FencedError",
    "FileChunkStorage",
    "HdfsChunkStorage",
    "InvalidManifestError",
    "InvalidTier2UriError",
    "ManifestConflictError",
    "ManifestNotFoundError",
    "ManifestStore",
    "ManifestsSeen",
    "S3ChunkStorage",
    "SegmentManifest",
    "SegmentReader",
    "SegmentState",
    "Tier2ClosedError",
    "Tier2Error",
    "Tier2IOError",
    "Tier2UnavailableError",
    "TimeIndexEntry",
    "UnreadableManifest",
    "chunk_key",
    "chunks_of",
    "load_chunk_index",
    "manifest_key",
    "open_chunk_storage",
    "read_time_index",
    "read_verified",
    "segment_key",
    "time_index_key",
]


def __getattr__(name: str) -> Any:
    # boto3 and pyarrow load only for code that names their adapters (or opens their URIs).
    if name == "S3ChunkStorage":
        from segmentstore.tier2.s3_storage import S3ChunkStorage

        return S3ChunkStorage
    if name == "HdfsChunkStorage":
        from segmentstore.tier2.hdfs_storage import HdfsChunkStorage

        return HdfsChunkStorage
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
