"""Which S3 failures mean "unreachable, retry later", for both SDKs the S3 adapter uses.

pyarrow raises ``OSError`` whose message carries the AWS SDK's error type and, when it has no
name for it, the HTTP status: ``AWS Error NETWORK_CONNECTION during HeadObject operation: ...``,
``AWS Error UNKNOWN (HTTP status 503) during ...``. botocore raises connection and timeout
exceptions, or ``ClientError`` with the status and S3's error code.
"""

from __future__ import annotations

import re

import botocore.exceptions as boto_errors

from segmentstore.tier2.errors import (
    ChunkNotFoundError,
    Tier2Error,
    Tier2IOError,
    Tier2UnavailableError,
)

# The AWS C++ SDK's names (aws/core/client/CoreErrors.h) of errors worth retrying.
_TRANSIENT_ARROW_TYPES = frozenset(
    {
        "NETWORK_CONNECTION",
        "SERVICE_UNAVAILABLE",
        "INTERNAL_FAILURE",
        "SLOW_DOWN",
        "THROTTLING",
        "REQUEST_TIMEOUT",
        "REQUEST_TIME_TOO_SKEWED",
    }
)
# S3's error codes of the same kind (with any 5xx status).
_TRANSIENT_S3_CODES = frozenset(
    {
        "SlowDown",
        "ServiceUnavailable",
        "InternalError",
        "RequestTimeout",
        "Throttling",
        "ThrottlingException",
        "RequestLimitExceeded",
        "RequestTimeTooSkewed",
    }
)
_ARROW_ERROR = re.compile(r"AWS Error (\w+)(?: \(HTTP status (\d+)\))?")
_BOTO_CONNECTION_ERRORS = (
    boto_errors.ConnectionError,  # refused, closed, DNS, proxy
    boto_errors.HTTPClientError,  # read and connect timeouts, a stream cut midway
    boto_errors.IncompleteReadError,
)


def translate_arrow_error(uri: str, e: BaseException, key: str) -> Tier2Error:
    if isinstance(e, FileNotFoundError):
        return ChunkNotFoundError(key)
    message = str(e)
    match = _ARROW_ERROR.search(message)
    if match is not None:
        error_type, status = match.group(1), int(match.group(2) or 0)
        if error_type in _TRANSIENT_ARROW_TYPES or status >= 500:
            return Tier2UnavailableError(uri, _on(key, message))
    return Tier2IOError(uri, key, message, getattr(e, "errno", None))


def is_transient_boto_error(e: Exception) -> bool:
    if isinstance(e, _BOTO_CONNECTION_ERRORS):
        return True
    if isinstance(e, boto_errors.ClientError):
        status = int(e.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
        return status >= 500 or e.response.get("Error", {}).get("Code") in _TRANSIENT_S3_CODES
    return False


def unavailable(uri: str, e: Exception, key: str) -> Tier2UnavailableError:
    return Tier2UnavailableError(uri, _on(key, f"{type(e).__name__}: {e}"))


def _on(key: str, message: str) -> str:
    return f"{key}: {message}" if key else message
