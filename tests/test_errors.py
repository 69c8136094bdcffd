"""The error tree: every leaf has its own docs/api.md code and structured fields."""

from __future__ import annotations

import segmentstore
from segmentstore.errors import SegmentStoreError, leaf_error_classes

API_CODES = {
    "invalid_name", "invalid_argument", "unauthorized", "forbidden", "segment_not_found",
    "container_not_found", "segment_exists", "segment_sealed", "segment_truncated", "bad_offset",
    "bad_attribute_update", "payload_too_large", "offset_beyond_end", "end_of_segment",
    "invalid_events", "throttled", "container_unavailable", "insufficient_storage",
    "request_timeout", "request_header_too_large",
    "writer_seq_mismatch",
}  # fmt: skip


def test_every_api_code_has_exactly_one_leaf() -> None:
    codes = [cls.code for cls in leaf_error_classes()]
    assert sorted(codes) == sorted(API_CODES)


def test_every_leaf_is_exported() -> None:
    for cls in leaf_error_classes():
        assert getattr(segmentstore, cls.__name__) is cls
        assert cls.__name__ in segmentstore.__all__
        assert issubclass(cls, SegmentStoreError)
