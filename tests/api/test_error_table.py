"""The one error table of ``api/errors.py`` is total and says what docs/api.md says."""

from __future__ import annotations

import json

import segmentstore.contracts.errors as e
from segmentstore.api.errors import STATUS, error_response
from segmentstore.contracts.errors import SegmentStoreError, leaf_error_classes

# docs/api.md, Errors: status -> codes.
API_STATUSES = {
    400: {"invalid_name", "invalid_argument"},
    401: {"unauthorized"},
    403: {"forbidden"},
    404: {"segment_not_found", "container_not_found"},
    408: {"request_timeout"},
    409: {"segment_exists", "segment_sealed"},
    410: {"segment_truncated"},
    412: {"bad_offset", "bad_attribute_update", "writer_seq_mismatch"},
    413: {"payload_too_large"},
    431: {"request_header_too_large"},
    416: {"offset_beyond_end", "end_of_segment"},
    422: {"invalid_events"},
    502: {"data_corrupted"},
    429: {"throttled"},
    503: {"container_unavailable"},
    507: {"insufficient_storage"},
}

SAMPLES: list[SegmentStoreError] = [
    e.InvalidNameError("bad"),
    e.InvalidArgumentError("bad"),
    e.UnauthorizedError("who"),
    e.ForbiddenError("no"),
    e.SegmentNotFoundError("s"),
    e.ContainerNotFoundError(9),
    e.SegmentExistsError("s"),
    e.SegmentSealedError("s"),
    e.SegmentTruncatedError("s", 10),
    e.BadOffsetError("s", 3, 5),
    e.BadAttributeUpdateError("k", "no"),
    e.WriterSeqMismatchError("s", 4, 2),
    e.PayloadTooLargeError(10, 5),
    e.RequestTimeoutError(30_000),
    e.RequestHeaderTooLargeError(65_536),
    e.OffsetBeyondEndError("s", 7, 5),
    e.EndOfSegmentError("s", 5),
    e.InvalidEventsError("bad"),
    e.ThrottledError("full", retry_after_ms=2500),
    e.ContainerUnavailableError(1, "recovering"),
    e.InsufficientStorageError("disk"),
    e.DataCorruptedError("s", "segments/x/chunk", 0, 65536, "its CRC32C does not match"),
]


def test_every_leaf_is_in_the_table() -> None:
    assert set(STATUS) == set(leaf_error_classes())


def test_the_table_matches_api_md() -> None:
    for cls, status in STATUS.items():
        assert cls.code in API_STATUSES[status], (cls.__name__, status)


def test_every_leaf_renders_with_its_fields() -> None:
    assert {type(s) for s in SAMPLES} == set(leaf_error_classes())
    for error in SAMPLES:
        response = error_response(error)
        assert response.status_code == STATUS[type(error)]
        body = json.loads(bytes(response.body))
        assert body == {"error": {"code": error.code, "message": error.message, **error.fields()}}
        if response.status_code in (429, 503):
            assert int(response.headers["Retry-After"]) >= 1
        else:
            assert "Retry-After" not in response.headers


def test_retry_after_is_in_whole_seconds_rounded_up() -> None:
    assert error_response(e.ThrottledError("x", retry_after_ms=2500)).headers["Retry-After"] == "3"
    assert error_response(e.ThrottledError("x", retry_after_ms=1)).headers["Retry-After"] == "1"


def test_fields_sit_inside_the_error_object() -> None:
    body = json.loads(bytes(error_response(e.BadOffsetError("s", 3, 5)).body))
    assert body["error"]["expected_offset"] == 3 and body["error"]["length"] == 5
    assert set(body) == {"error"}
