"""The columns the data source yields, as Arrow schemas and as Spark DDL.

``events`` mode: one row per event (``event`` is its payload, without the header); ``bytes``
mode: one row per piece of raw segment bytes (``data``). ``offset`` is the segment offset of
the event's header or of the piece's first byte; ``chunk`` the Tier 2 key of the chunk that
holds that byte.
"""

from __future__ import annotations

import pyarrow as pa


def _schema(payload: str) -> pa.Schema:
    return pa.schema(
        [
            pa.field("segment", pa.string(), nullable=False),
            pa.field("offset", pa.int64(), nullable=False),
            pa.field(payload, pa.binary(), nullable=False),
            pa.field("chunk", pa.string(), nullable=False),
        ]
    )


EVENTS_SCHEMA = _schema("event")
BYTES_SCHEMA = _schema("data")
EVENTS_DDL = (
    "segment string not null, offset bigint not null, event binary not null, chunk string not null"
)
BYTES_DDL = (
    "segment string not null, offset bigint not null, data binary not null, chunk string not null"
)
