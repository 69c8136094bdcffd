"""A Pravega-style tiered segment store: durable append-only segments with arbitrary reads.

The embedded entry point is :class:`SegmentStore`; every error it raises is a
:class:`SegmentStoreError` leaf (see :mod:`segmentstore.contracts.errors`). The HTTP contract
is in ``docs/api.md``; the parts and how they fit are in ``docs/architecture.md``.

The names below load on first use, so that ``import segmentstore.client`` (which the slim,
client-only install provides) never loads the store, its settings or its storage backends;
the error classes are the contract's, light enough to load at once.

The modules of this package itself are the vocabulary every part shares (``settings``,
``arguments``, ``data_dir``, ``observations``, ``version``, ``loopback``).
May import: ``contracts`` and ``tier1`` (the settings tree takes the JetStream log's options
and the local log's defaults as tier1 defines them).

What lives where (each package's docstring says what it owns and may import):

    segmentstore/           the public surface: store, settings, config
    ├── contracts/          what client and server share: errors, names, attribute updates,
    │                       events, the segment -> container mapping
    ├── metadata/           what a container knows of its segments: metadata, attributes, time index
    ├── logs/               the Durable Log: operations, data frames, Tier 1 retention, recovery
    ├── reading/            the read index (AVL tree), the cache manager, Tier 2 reads, events
    ├── writer/             the Storage Writer: aggregation and flushes to Tier 2
    ├── containers/         the segment container that ties them together; retention
    ├── cluster/            cluster mode: membership, leases, the assignment of containers
    ├── cli/                the command line, the composition root
    ├── client/             the HTTP client (needs contracts/ alone)
    ├── bench/              the benchmarks
    ├── drill/              recovery drills
    ├── harness/            the processes benchmarks, drills and tests start on loopback
    ├── tier1/ tier2/ cache/    the storage leaves (repository folders tier1/, tier2/, cache/)
    └── api/ jobs/          the HTTP API and the Spark jobs (repository folders api/, jobs/)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from segmentstore.contracts.errors import public_error_classes

if TYPE_CHECKING:
    from segmentstore.contracts.attributes import AttributeUpdate as AttributeUpdate
    from segmentstore.contracts.attributes import UpdateType as UpdateType

    # Every error class, as the tree declares them (what public_error_classes lists).
    from segmentstore.contracts.errors import *  # noqa: F403
    from segmentstore.contracts.segment_info import AppendResult as AppendResult
    from segmentstore.contracts.segment_info import EventsRead as EventsRead
    from segmentstore.contracts.segment_info import SegmentInfo as SegmentInfo
    from segmentstore.settings import Settings as Settings
    from segmentstore.store import SegmentStore as SegmentStore

# The error tree is the contract's: light, and loaded with the package (the client needs it).
_ERRORS = {cls.__name__: cls for cls in public_error_classes()}
# public name -> the module that defines it, for the names loaded on first use
_HOMES = {
    "AttributeUpdate": "segmentstore.contracts.attributes",
    "UpdateType": "segmentstore.contracts.attributes",
    "AppendResult": "segmentstore.contracts.segment_info",
    "EventsRead": "segmentstore.contracts.segment_info",
    "SegmentInfo": "segmentstore.contracts.segment_info",
    "Settings": "segmentstore.settings",
    "SegmentStore": "segmentstore.store",
}

__all__ = sorted([*_ERRORS, *_HOMES])


def __getattr__(name: str) -> Any:
    if name in _ERRORS:
        return _ERRORS[name]
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'segmentstore' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
