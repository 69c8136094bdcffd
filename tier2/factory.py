"""The Tier 2 URI -> chunk storage implementation, each backend imported only when asked for."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from segmentstore.tier2.chunk_storage import ChunkStorage
from segmentstore.tier2.errors import InvalidTier2UriError
from segmentstore.tier2.location import Tier2Location


def open_chunk_storage(
    uri: str, *, options: Mapping[str, Any] | None = None, must_exist: bool = False
) -> ChunkStorage:
    """The chunk storage for ``uri``, chosen by its scheme.

    ``must_exist``: the location is only read, so a mistyped one must not pass for an empty
    one: a missing directory (which is otherwise created) or S3 bucket is
    ``InvalidTier2UriError``.

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
        if must_exist and not os.path.isdir(location.path):
            raise InvalidTier2UriError(uri, f"there is no directory {location.path}")
        return FileChunkStorage(location.path)
    if location.scheme == "s3":
        from segmentstore.tier2.s3_storage import S3ChunkStorage, S3Options

        s3 = S3ChunkStorage(location.host, location.path, S3Options.parse(uri, given))
        if must_exist:
            try:
                s3.check_bucket()
            except BaseException:
                s3.close()
                raise
        return s3
    from segmentstore.tier2.hdfs_storage import HdfsChunkStorage, HdfsOptions

    return HdfsChunkStorage(
        location.host, location.port, location.path, HdfsOptions.parse(uri, given)
    )
