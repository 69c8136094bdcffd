"""A Pravega-style tiered segment store: durable append-only segments with arbitrary reads.

The embedded entry point is :class:`SegmentStore`; every error it raises is a
:class:`SegmentStoreError` leaf (see :mod:`segmentstore.errors`).
"""

from segmentstore.attributes import AttributeUpdate, UpdateType
from segmentstore.errors import (
    BadAttributeUpdateError,
    BadOffsetError,
    ContainerNotFoundError,
    ContainerUnavailableError,
    EndOfSegmentError,
    ForbiddenError,
    InsufficientStorageError,
    InvalidArgumentError,
    InvalidEventsError,
    InvalidNameError,
    OffsetBeyondEndError,
    PayloadTooLargeError,
    SegmentExistsError,
    SegmentNotFoundError,
    SegmentSealedError,
    SegmentStoreError,
    SegmentTruncatedError,
    ThrottledError,
    UnauthorizedError,
)
from segmentstore.segment_info import AppendResult, EventsRead, SegmentInfo
from segmentstore.settings import Settings
from segmentstore.store import SegmentStore

__all__ = [
    "AppendResult",
    "AttributeUpdate",
    "BadAttributeUpdateError",
    "BadOffsetError",
    "ContainerNotFoundError",
    "ContainerUnavailableError",
    "EndOfSegmentError",
    "EventsRead",
    "ForbiddenError",
    "InsufficientStorageError",
    "InvalidArgumentError",
    "InvalidEventsError",
    "InvalidNameError",
    "OffsetBeyondEndError",
    "PayloadTooLargeError",
    "SegmentExistsError",
    "SegmentInfo",
    "SegmentNotFoundError",
    "SegmentSealedError",
    "SegmentStore",
    "SegmentStoreError",
    "SegmentTruncatedError",
    "Settings",
    "ThrottledError",
    "UnauthorizedError",
    "UpdateType",
]
