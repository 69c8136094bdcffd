"""A Pravega-style tiered segment store: durable append-only segments with arbitrary reads.

The embedded entry point is :class:`SegmentStore`; every error it raises is a
:class:`SegmentStoreError` leaf (see :mod:`segmentstore.contracts.errors`). The HTTP contract
is in ``docs/api.md``; the parts and how they fit are in ``docs/architecture.md``.

The names below load on first use, so that ``import segmentstore.client`` (which the slim,
client-only install provides) never loads the store, its settings or its storage backends.

What lives where (each package's docstring says what it owns and may import):

    segmentstore/           the public surface: store, settings, config
    ├── contracts/          what client and server share: errors, names, attribute updates, events
    ├── metadata/           what a container knows of its segments: metadata, attributes, time index
    ├── logs/               the Durable Log: operations, data frames, Tier 1 retention, recovery
    ├── reading/            the read index (AVL tree), the cache manager, Tier 2 reads, events
    ├── writer/             the Storage Writer: aggregation and flushes to Tier 2
    ├── containers/         the segment container that ties them together; mapping; retention
    ├── cli/                the command line, the composition root
    ├── client/             the HTTP client (needs contracts/ alone)
    ├── bench/              the benchmarks
    ├── tier1/ tier2/ cache/    the storage leaves (repository folders tier1/, tier2/, cache/)
    └── api/ jobs/          the HTTP API and the Spark jobs (repository folders api/, jobs/)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from segmentstore.contracts.attributes import AttributeUpdate, UpdateType
    from segmentstore.contracts.errors import (
        BadAttributeUpdateError,
        BadOffsetError,
        ContainerNotFoundError,
        ContainerUnavailableError,
        DataCorruptedError,
        EndOfSegmentError,
        ForbiddenError,
        InsufficientStorageError,
        InvalidArgumentError,
        InvalidEventsError,
        InvalidNameError,
        OffsetBeyondEndError,
        PayloadTooLargeError,
        RequestHeaderTooLargeError,
        RequestTimeoutError,
        SegmentExistsError,
        SegmentNotFoundError,
        SegmentSealedError,
        SegmentStoreError,
        SegmentTruncatedError,
        ThrottledError,
        UnauthorizedError,
        WriterSeqMismatchError,
    )
    from segmentstore.contracts.segment_info import AppendResult, EventsRead, SegmentInfo
    from segmentstore.settings import Settings
    from segmentstore.store import SegmentStore

_ERRORS = (
    "BadAttributeUpdateError",
    "BadOffsetError",
    "ContainerNotFoundError",
    "ContainerUnavailableError",
    "DataCorruptedError",
    "EndOfSegmentError",
    "ForbiddenError",
    "InsufficientStorageError",
    "InvalidArgumentError",
    "InvalidEventsError",
    "InvalidNameError",
    "OffsetBeyondEndError",
    "PayloadTooLargeError",
    "RequestHeaderTooLargeError",
    "RequestTimeoutError",
    "SegmentExistsError",
    "SegmentNotFoundError",
    "SegmentSealedError",
    "SegmentStoreError",
    "SegmentTruncatedError",
    "ThrottledError",
    "UnauthorizedError",
    "WriterSeqMismatchError",
)
# public name -> the module that defines it
_HOMES = {
    **dict.fromkeys(_ERRORS, "segmentstore.contracts.errors"),
    "AttributeUpdate": "segmentstore.contracts.attributes",
    "UpdateType": "segmentstore.contracts.attributes",
    "AppendResult": "segmentstore.contracts.segment_info",
    "EventsRead": "segmentstore.contracts.segment_info",
    "SegmentInfo": "segmentstore.contracts.segment_info",
    "Settings": "segmentstore.settings",
    "SegmentStore": "segmentstore.store",
}

__all__ = [
    "AppendResult",
    "AttributeUpdate",
    "BadAttributeUpdateError",
    "BadOffsetError",
    "ContainerNotFoundError",
    "ContainerUnavailableError",
    "DataCorruptedError",
    "EndOfSegmentError",
    "EventsRead",
    "ForbiddenError",
    "InsufficientStorageError",
    "InvalidArgumentError",
    "InvalidEventsError",
    "InvalidNameError",
    "OffsetBeyondEndError",
    "PayloadTooLargeError",
    "RequestHeaderTooLargeError",
    "RequestTimeoutError",
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
    "WriterSeqMismatchError",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'segmentstore' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
