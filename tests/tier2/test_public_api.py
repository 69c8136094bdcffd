"""The package's public names, its error tree, and that importing it loads no backend SDK."""

from __future__ import annotations

import subprocess
import sys

from segmentstore import tier2


def test_public_names_are_pinned() -> None:
    assert sorted(tier2.__all__) == [
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
    for name in tier2.__all__:
        assert getattr(tier2, name) is not None


def test_every_error_is_a_tier2_error() -> None:
    errors = [
        value
        for value in (getattr(tier2, name) for name in tier2.__all__)
        if isinstance(value, type) and issubclass(value, BaseException)
    ]
    assert len(errors) == 14
    for error in errors:
        assert issubclass(error, tier2.Tier2Error), error


def test_the_file_backend_loads_no_sdk(tmp_path: object) -> None:
    code = (
        "import sys\nfrom segmentstore import tier2\n"
        f"s = tier2.open_chunk_storage('file://{tmp_path}/t2')\n"
        "s.create('k', [b'x']); tier2.SegmentReader(s).list_segments(); s.close()\n"
        "print(sorted(m for m in ('boto3', 'botocore', 'pyarrow') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "[]", result.stderr
