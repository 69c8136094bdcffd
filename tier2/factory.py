"""The Tier 2 URI -> chunk storage implementation, each backend imported only when asked for."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from segmentstore.tier2.chunk_storage import ChunkStorage
from segmentstore.tier2.errors import InvalidTier2UriError
from segmentstore.tier2.location import Tier2Location


def open_chunk_storage(uri: str, *, options: Mapping[str, Any] | None = None) -> ChunkStorage:
    """The chunk storage for ``uri``, chosen by its scheme.

    * ``file:///abs/path`` or a bare path: a local directory (created if missing). No options.
    * ``s3://bucket[/prefix]``: options ``endpoint_url``, ``region``, ``access_key``,
      ``secret_key``, ``session_token``, ``create_bucket`` (default False), ``connect_timeout_s``,
      ``request_timeout_s``, ``max_attempts``, ``multipart_threshold_bytes``,
      ``multipart_part_bytes`` (see :class:`segmentstore.tier2.s3_storage.S3Options`).
    * ``hdfs://host:port/path``: options ``user``, ``replication``, ``lock_wait_s``. Needs
      libhdfs and a JVM; without them this raises ``Tier2UnavailableError`` saying so.

    Raises ``InvalidTier2UriError`` for an unknown scheme, a malformed URI or an unknown option.
    Backend libraries are imported only for the scheme asked for.
    """
    location = Tier2Location.parse(uri)
    given = dict(options or {})
    if location.scheme == "file":
        from segmentstore.tier2.file_storage import FileChunkStorage

        if given:
            raise InvalidTier2UriError(uri, f"file:// takes no options, got {sorted(given)}")
        return FileChunkStorage(location.path)
    if location.scheme == "s3":
        from segmentstore.tier2.s3_storage import S3ChunkStorage, S3Options

        return S3ChunkStorage(location.host, location.path, S3Options.parse(uri, given))
    from segmentstore.tier2.hdfs_storage import HdfsChunkStorage, HdfsOptions

    return HdfsChunkStorage(
        location.host, location.port, location.path, HdfsOptions.parse(uri, given)
    )
