"""``S3ChunkStorage``: chunk storage in an S3 bucket (or an S3-compatible store) under a prefix.

Reads, sizes and listings go through ``pyarrow.fs.S3FileSystem`` (C++, ranged GETs without the
GIL). Writes and deletes go through boto3, because pyarrow cannot make them conditional or keep
from littering: every write is conditional (``If-None-Match: *`` for a new object, ``If-Match:
<ETag>`` to replace one), so ``create`` is exclusive and ``put_if`` is a compare-and-swap done by
S3 itself; large objects are multipart uploads whose completion carries the condition; and
``delete_object`` does not leave the directory marker that pyarrow's ``delete_file`` writes.
Version tokens are ETags. S3 has no append: every chunk is written whole.

Errors: connection failures, timeouts, 5xx and throttling become ``Tier2UnavailableError``
(after ``max_attempts`` tries of the SDKs' own retries); anything else ``Tier2IOError``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field, fields
from typing import Any
from urllib.parse import urlsplit

import boto3
import botocore.exceptions as boto_errors
import pyarrow.fs as pafs
from botocore.config import Config

from segmentstore.tier2.arrow_storage import ARROW_ERRORS, ArrowChunkStorage
from segmentstore.tier2.chunk_storage import Buffer, StampedKeys, check_key
from segmentstore.tier2.errors import (
    ChunkExistsError,
    ChunkNotFoundError,
    InvalidTier2UriError,
    ManifestConflictError,
    Tier2Error,
    Tier2IOError,
)
from segmentstore.tier2.s3_errors import is_transient_boto_error, translate_arrow_error, unavailable

MIB = 1024 * 1024
_MIN_PART_BYTES = 5 * MIB  # S3's floor for every part but the last


@dataclass(frozen=True, slots=True)
class S3Options:
    """The options of an ``s3://`` location; credentials never appear in its repr."""

    endpoint_url: str | None = None  # e.g. http://127.0.0.1:9000 for an S3-compatible store
    region: str = "us-east-1"
    access_key: str | None = field(default=None, repr=False)
    secret_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)
    create_bucket: bool = False  # create the bucket on open if it is missing
    connect_timeout_s: float = 5.0
    request_timeout_s: float = 30.0
    max_attempts: int = 3  # tries per request, the SDKs' retries included
    multipart_threshold_bytes: int = 8 * MIB  # larger objects are multipart uploads
    multipart_part_bytes: int = 8 * MIB

    @staticmethod
    def parse(uri: str, given: Mapping[str, Any]) -> S3Options:
        """Options from a mapping; ``InvalidTier2UriError`` for unknown keys or bad values."""
        known = {f.name: f for f in fields(S3Options)}
        if unknown := sorted(set(given) - set(known)):
            raise InvalidTier2UriError(uri, f"unknown s3 options {unknown}")
        # Settings files, environment variables and --option flags all give text.
        given = {name: _from_text(value, str(known[name].type)) for name, value in given.items()}
        for name, value in given.items():
            expected = known[name].type
            if not _has_type(value, str(expected)):
                raise InvalidTier2UriError(uri, f"option {name} must be {expected}")
        options = S3Options(**given)
        if options.endpoint_url is not None:
            parts = urlsplit(options.endpoint_url)
            if parts.scheme not in ("http", "https") or not parts.netloc:
                raise InvalidTier2UriError(uri, "endpoint_url must be http(s)://host[:port]")
        if (options.access_key is None) != (options.secret_key is None):
            raise InvalidTier2UriError(uri, "give both access_key and secret_key, or neither")
        if options.connect_timeout_s <= 0 or options.request_timeout_s <= 0:
            raise InvalidTier2UriError(uri, "timeouts must be positive")
        if options.max_attempts < 1:
            raise InvalidTier2UriError(uri, "max_attempts must be at least 1")
        if options.multipart_part_bytes < _MIN_PART_BYTES:
            raise InvalidTier2UriError(uri, f"multipart_part_bytes must be >= {_MIN_PART_BYTES}")
        if options.multipart_threshold_bytes < 0:
            raise InvalidTier2UriError(uri, "multipart_threshold_bytes must not be negative")
        return options


class S3ChunkStorage(ArrowChunkStorage):
    """Objects under ``s3://bucket/prefix/``. Thread-safe: pyarrow's file system and boto3
    clients are."""

    supports_append = False

    def __init__(self, bucket: str, prefix: str, options: S3Options) -> None:
        self._bucket = bucket
        self._prefix = f"{prefix}/" if prefix else ""
        self._options = options
        uri = f"s3://{bucket}/{prefix}" if prefix else f"s3://{bucket}"
        scheme, endpoint = None, None
        if options.endpoint_url is not None:
            parts = urlsplit(options.endpoint_url)
            scheme, endpoint = parts.scheme, parts.netloc
        try:
            fs = self._arrow_file_system(scheme, endpoint)
        except ARROW_ERRORS as e:
            raise InvalidTier2UriError(uri, f"pyarrow refused the options: {e}") from e
        super().__init__(uri, fs, f"{bucket}/{prefix}" if prefix else bucket)
        with _SESSION_LOCK:
            self._client = _session().client(
                "s3",
                endpoint_url=options.endpoint_url,
                region_name=options.region,
                aws_access_key_id=options.access_key,
                aws_secret_access_key=options.secret_key,
                aws_session_token=options.session_token,
                config=Config(
                    connect_timeout=options.connect_timeout_s,
                    read_timeout=options.request_timeout_s,
                    # total_max_attempts counts the first try; botocore's max_attempts would not.
                    retries={"total_max_attempts": options.max_attempts, "mode": "standard"},
                    # Path-style, like pyarrow with an endpoint override: S3-compatible stores
                    # rarely have the wildcard DNS that virtual-hosted buckets need.
                    s3={"addressing_style": "path" if options.endpoint_url else "auto"},
                ),
            )
        if options.create_bucket:
            try:
                self._create_bucket()
            except BaseException:
                self._client.close()
                raise

    def create(self, key: str, parts: Sequence[Buffer]) -> None:
        object_key = self._object_key(key)
        total = sum(memoryview(part).nbytes for part in parts)
        try:
            if total <= self._options.multipart_threshold_bytes:
                self._client.put_object(
                    Bucket=self._bucket, Key=object_key, Body=b"".join(parts), IfNoneMatch="*"
                )
            else:
                self._multipart_create(object_key, parts)
        except boto_errors.ClientError as e:
            if _status(e) in (409, 412):  # 409: a concurrent conditional write of the same key
                raise ChunkExistsError(key) from e
            raise self._boto_error(e, key) from e
        except boto_errors.BotoCoreError as e:
            raise self._boto_error(e, key) from e

    def append(self, key: str, offset: int, parts: Sequence[Buffer]) -> None:
        self._object_key(key)
        raise Tier2IOError(self.uri, key, "S3 has no append: write every chunk whole")

    def delete(self, key: str) -> None:
        object_key = self._object_key(key)
        try:
            self._client.delete_object(Bucket=self._bucket, Key=object_key)
        except (boto_errors.ClientError, boto_errors.BotoCoreError) as e:
            raise self._boto_error(e, key) from e

    def get(self, key: str) -> tuple[bytes, str] | None:
        object_key = self._object_key(key)
        try:
            response = self._client.get_object(Bucket=self._bucket, Key=object_key)
            data = bytes(response["Body"].read())
        except boto_errors.ClientError as e:
            if _code(e) in ("NoSuchKey", "404"):
                return None
            raise self._boto_error(e, key) from e
        except boto_errors.BotoCoreError as e:
            raise self._boto_error(e, key) from e
        return data, str(response["ETag"])

    def put_if(self, key: str, data: bytes, expected_version: str | None) -> str:
        object_key = self._object_key(key)
        condition = (
            {"IfNoneMatch": "*"} if expected_version is None else {"IfMatch": expected_version}
        )
        try:
            response = self._client.put_object(
                Bucket=self._bucket, Key=object_key, Body=data, **condition
            )
        except boto_errors.ClientError as e:
            if (reason := _conflict(e, expected_version)) is not None:
                raise ManifestConflictError(key, reason) from e
            raise self._boto_error(e, key) from e
        except boto_errors.BotoCoreError as e:
            raise self._boto_error(e, key) from e
        return str(response["ETag"])

    def list(
        self, prefix: str, start_after: str | None = None, limit: int | None = None
    ) -> list[str]:
        """S3 lists by prefix itself, a page of up to a thousand keys per request, in order."""
        return [key for key, _ in self._listing(prefix, start_after, limit)]

    def list_stamped(self, prefix: str) -> StampedKeys:
        """The listing's ETags are the stamps: no object is read."""
        return self._listing(prefix, None, None)

    def _listing(self, prefix: str, start_after: str | None, limit: int | None) -> StampedKeys:
        self._check_open()
        directory = prefix.rpartition("/")[0]
        if directory:
            check_key(directory)
        keys: StampedKeys = []
        arguments: dict[str, Any] = {"Bucket": self._bucket, "Prefix": self._prefix + prefix}
        if start_after is not None:
            arguments["StartAfter"] = self._prefix + start_after
        try:
            while limit is None or len(keys) < limit:
                if limit is not None:
                    arguments["MaxKeys"] = min(1000, limit - len(keys))
                page = self._client.list_objects_v2(**arguments)
                for entry in page.get("Contents", ()):
                    key = entry["Key"][len(self._prefix) :]
                    # Directory markers (other tools write them) and the backends' own files.
                    if (
                        key
                        and not key.endswith("/")
                        and not any(part.startswith(".") for part in key.split("/"))
                    ):
                        keys.append((key, str(entry.get("ETag", ""))))
                if not page.get("IsTruncated"):
                    break
                arguments["ContinuationToken"] = page["NextContinuationToken"]
        except (boto_errors.ClientError, boto_errors.BotoCoreError) as e:
            raise self._boto_error(e, prefix) from e
        return keys if limit is None else keys[:limit]

    def close(self) -> None:
        if not self._closed:
            super().close()
            self._client.close()

    # -- internals ---------------------------------------------------------------------------

    def _object_key(self, key: str) -> str:
        self._path(key)  # checks the key, and that we are open
        return self._prefix + key

    def _translate(self, e: BaseException, key: str) -> Tier2Error:
        return translate_arrow_error(self.uri, e, key)

    def _boto_error(self, e: Exception, key: str) -> Tier2Error:
        if is_transient_boto_error(e):
            return unavailable(self.uri, e, key)
        if isinstance(e, boto_errors.ClientError):
            code = _code(e)
            if code in ("NoSuchKey", "404"):
                return ChunkNotFoundError(key)
            if code == "NoSuchBucket":
                reason = f"bucket {self._bucket} does not exist (open with create_bucket=True)"
                return Tier2IOError(self.uri, key, reason)
            return Tier2IOError(self.uri, key, f"{code}: {_message(e)}")
        return Tier2IOError(self.uri, key, f"{type(e).__name__}: {e}")

    def _multipart_create(self, object_key: str, parts: Sequence[Buffer]) -> None:
        upload = self._client.create_multipart_upload(Bucket=self._bucket, Key=object_key)
        upload_id = upload["UploadId"]
        try:
            uploaded = []
            for number, body in enumerate(_pieces(parts, self._options.multipart_part_bytes), 1):
                response = self._client.upload_part(
                    Bucket=self._bucket,
                    Key=object_key,
                    UploadId=upload_id,
                    PartNumber=number,
                    Body=body,
                )
                uploaded.append({"PartNumber": number, "ETag": response["ETag"]})
            self._client.complete_multipart_upload(
                Bucket=self._bucket,
                Key=object_key,
                UploadId=upload_id,
                MultipartUpload={"Parts": uploaded},
                IfNoneMatch="*",
            )
        except BaseException:
            with suppress(Exception):  # best effort; a lifecycle rule reaps what is left
                self._client.abort_multipart_upload(
                    Bucket=self._bucket, Key=object_key, UploadId=upload_id
                )
            raise

    def _arrow_file_system(self, scheme: str | None, endpoint: str | None) -> pafs.S3FileSystem:
        options = self._options
        return pafs.S3FileSystem(
            access_key=options.access_key,
            secret_key=options.secret_key,
            session_token=options.session_token,
            region=options.region,
            scheme=scheme,
            endpoint_override=endpoint,
            connect_timeout=options.connect_timeout_s,
            request_timeout=options.request_timeout_s,
            retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=options.max_attempts),
        )

    def check_bucket(self) -> None:
        """``InvalidTier2UriError`` unless the bucket exists (and these credentials see it)."""
        try:
            self._client.head_bucket(Bucket=self._bucket)
        except boto_errors.ClientError as e:
            if _status(e) == 404:
                raise InvalidTier2UriError(self.uri, f"bucket {self._bucket} does not exist") from e
            raise self._boto_error(e, "") from e
        except boto_errors.BotoCoreError as e:
            raise self._boto_error(e, "") from e

    def _create_bucket(self) -> None:
        try:
            self._client.head_bucket(Bucket=self._bucket)
            return
        except boto_errors.ClientError as e:
            if _status(e) != 404:
                raise self._boto_error(e, "") from e
        except boto_errors.BotoCoreError as e:
            raise self._boto_error(e, "") from e
        arguments: dict[str, Any] = {"Bucket": self._bucket}
        if self._options.region != "us-east-1":  # S3 refuses the default region spelled out
            arguments["CreateBucketConfiguration"] = {"LocationConstraint": self._options.region}
        try:
            self._client.create_bucket(**arguments)
        except boto_errors.ClientError as e:
            if _code(e) not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                raise self._boto_error(e, "") from e
        except boto_errors.BotoCoreError as e:
            raise self._boto_error(e, "") from e


# One boto3 session for every instance: a session parses S3's service model once (~80 ms), so
# clients after the first are cheap. Sessions are not thread-safe, hence the lock; the clients
# they make are. Credentials go to each client, not to the session.
_SESSION_LOCK = threading.Lock()
_SESSION: boto3.session.Session | None = None


def _session() -> boto3.session.Session:
    global _SESSION
    if _SESSION is None:
        _SESSION = boto3.session.Session()
    return _SESSION


def _pieces(parts: Sequence[Buffer], size: int) -> Iterator[bytes]:
    """The concatenation of ``parts`` cut into pieces of ``size`` bytes (the last may be less)."""
    pending = bytearray()
    for part in parts:
        view = memoryview(part).cast("B")
        while view:
            taken = view[: size - len(pending)]
            pending += taken
            view = view[len(taken) :]
            if len(pending) == size:
                yield bytes(pending)
                pending.clear()
    if pending:
        yield bytes(pending)


def _conflict(e: boto_errors.ClientError, expected_version: str | None) -> str | None:
    """Why a conditional PUT was refused, or None if it was refused for another reason."""
    status, code = _status(e), _code(e)
    if status == 412:
        if expected_version is None:
            return "expected no object, but one exists"
        return f"expected version {expected_version}, but the object has changed"
    if code == "NoSuchKey" and expected_version is not None:
        return f"expected version {expected_version}, but there is no object"
    if status == 409:  # ConditionalRequestConflict: another conditional write is in flight
        return f"a concurrent conditional write won ({code})"
    return None


def _status(e: boto_errors.ClientError) -> int:
    return int(e.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))


def _code(e: boto_errors.ClientError) -> str:
    return str(e.response.get("Error", {}).get("Code", ""))


def _message(e: boto_errors.ClientError) -> str:
    return str(e.response.get("Error", {}).get("Message", ""))


def _from_text(value: object, annotation: str) -> object:
    """``value`` converted to the option's type if it is text that spells one; else as is."""
    if not isinstance(value, str):
        return value
    text = value.strip().lower()
    try:
        if annotation.startswith("bool"):
            return {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}[
                text
            ]
        if annotation.startswith("int"):
            return int(text)
        if annotation.startswith("float"):
            return float(text)
    except (KeyError, ValueError):
        return value  # the type check that follows names the option
    return value


def _has_type(value: object, annotation: str) -> bool:
    if value is None:
        return "None" in annotation
    if annotation.startswith("bool"):
        return isinstance(value, bool)
    if annotation.startswith("int"):
        return isinstance(value, int) and not isinstance(value, bool)
    if annotation.startswith("float"):
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, str)
