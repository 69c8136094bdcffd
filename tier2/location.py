"""Parsing a Tier 2 URI into the location it names: ``file://``, ``s3://`` or ``hdfs://``."""

from __future__ import annotations

import os
import posixpath
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from segmentstore.tier2.chunk_storage import check_key
from segmentstore.tier2.errors import InvalidTier2UriError

DEFAULT_HDFS_PORT = 8020
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")


@dataclass(frozen=True, slots=True)
class Tier2Location:
    """``path`` is an absolute directory for file and hdfs, the key prefix (maybe "") for s3;
    ``host`` is the bucket for s3."""

    scheme: str
    host: str
    port: int
    path: str

    @property
    def uri(self) -> str:
        if self.scheme == "file":
            return f"file://{self.path}"
        if self.scheme == "s3":
            return f"s3://{self.host}/{self.path}" if self.path else f"s3://{self.host}"
        return f"hdfs://{self.host}:{self.port}{self.path}"

    @staticmethod
    def parse(uri: str) -> Tier2Location:
        if "://" not in uri:
            if not uri:
                raise InvalidTier2UriError(uri, "empty")
            if _SCHEME.match(uri):  # s3:bucket is a typo, not a directory named "s3:bucket"
                raise InvalidTier2UriError(uri, "write scheme://..., or ./path for such a path")
            return Tier2Location("file", "", 0, os.path.abspath(uri))
        try:
            parts = urlsplit(uri)
            port = parts.port
        except ValueError as e:
            raise InvalidTier2UriError(uri, str(e)) from e
        if parts.query or parts.fragment:
            raise InvalidTier2UriError(uri, "a query or fragment is not allowed")
        if parts.username is not None or parts.password is not None:
            raise InvalidTier2UriError(uri, "credentials go in the options, not the URI")
        if parts.scheme == "file":
            return _file(uri, parts.netloc, parts.path)
        if parts.scheme == "s3":
            return _s3(uri, parts.netloc, parts.path)
        if parts.scheme == "hdfs":
            return _hdfs(uri, parts.hostname or "", port, parts.path)
        raise InvalidTier2UriError(uri, f"unknown scheme {parts.scheme!r} (file, s3 or hdfs)")


def _file(uri: str, netloc: str, path: str) -> Tier2Location:
    if netloc in ("", "localhost"):
        if not path.startswith("/"):
            raise InvalidTier2UriError(uri, "a file:// URI needs an absolute path")
        return Tier2Location("file", "", 0, os.path.abspath(path))
    if netloc in (".", ".."):
        # file://./data/tier2 is not standard, but it is what a user writes for a relative path.
        return Tier2Location("file", "", 0, os.path.abspath(netloc + path))
    raise InvalidTier2UriError(uri, f"file:// on another host ({netloc}) is not supported")


def _s3(uri: str, bucket: str, path: str) -> Tier2Location:
    if not _BUCKET.fullmatch(bucket):
        raise InvalidTier2UriError(uri, f"{bucket!r} is not an S3 bucket name")
    prefix = path.strip("/")
    if prefix:
        try:
            check_key(prefix)
        except ValueError as e:
            raise InvalidTier2UriError(uri, f"the prefix {prefix!r} is not a valid key") from e
    return Tier2Location("s3", bucket, 0, prefix)


def _hdfs(uri: str, host: str, port: int | None, path: str) -> Tier2Location:
    if not host:
        raise InvalidTier2UriError(uri, "an hdfs:// URI needs a name node host")
    root = posixpath.normpath("/" + path).lstrip("/")
    return Tier2Location("hdfs", host, port or DEFAULT_HDFS_PORT, "/" + root)
