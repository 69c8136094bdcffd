"""Decoding the event framing of docs/api.md into Arrow, without the service's code.

Each event is ``type i32be (0) | length i32be | payload``. The header walk is the only Python
loop (one ``struct.unpack_from`` per event); the payloads never pass through Python objects:
the walk's event starts become the offsets of an Arrow binary array over the bytes as read
(header and payload of each event), and one vectorised ``binary_slice`` drops the headers.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

from segmentstore.jobs.errors import BrokenFramingError
from segmentstore.jobs.schema import BYTES_SCHEMA, EVENTS_SCHEMA

HEADER = struct.Struct(">ii")
EVENT_TYPE = 0
# The largest payload any store configuration accepts (max_append_bytes is at most 64 MiB):
# a bigger length is not an event header.
MAX_PAYLOAD_BYTES = 64 * 1024 * 1024 - HEADER.size


class Walk(NamedTuple):
    """What :func:`walk_events` found in a buffer."""

    starts: list[int]
    """Where each whole event begins in the buffer."""
    whole: int
    """How many leading bytes are whole events (the end of the last one)."""
    need: int
    """0 if the buffer ends exactly after an event; else how many bytes from ``whole`` the next
    event takes (just the header size while its header is cut, so at least that)."""


def walk_events(data: bytes | memoryview, segment: str, at_offset: int) -> Walk:
    """Walk the headers of ``data``, read at segment offset ``at_offset``, which must be an
    event boundary; ``BrokenFramingError`` at the first header that is no event header."""
    unpack = HEADER.unpack_from
    size = len(data)
    last_header = size - HEADER.size
    starts: list[int] = []
    append = starts.append
    position = 0
    while position <= last_header:
        kind, length = unpack(data, position)
        if kind != EVENT_TYPE or not 0 <= length <= MAX_PAYLOAD_BYTES:
            raise BrokenFramingError(
                segment, at_offset + position, f"its header says type {kind}, length {length}"
            )
        following = position + HEADER.size + length
        if following > size:
            return Walk(starts, position, HEADER.size + length)
        append(position)
        position = following
    return Walk(starts, position, HEADER.size if position < size else 0)


def events_batch(
    data: bytes | memoryview, walk: Walk, segment: str, at_offset: int, chunk: str
) -> pa.RecordBatch:
    """The whole events of ``walk`` as rows of :data:`EVENTS_SCHEMA`."""
    count = len(walk.starts)
    boundaries = pa.array([*walk.starts, walk.whole], pa.int32())
    framed = pa.Array.from_buffers(
        pa.binary(), count, [None, boundaries.buffers()[1], pa.py_buffer(data)]
    )
    # An explicit stop: binary_slice without one overflows its size estimate (pyarrow 26).
    payloads = pc.binary_slice(framed, HEADER.size, HEADER.size + MAX_PAYLOAD_BYTES)
    offsets = pc.add(boundaries.slice(0, count).cast(pa.int64()), at_offset)
    return pa.RecordBatch.from_arrays(
        [pa.repeat(segment, count), offsets, payloads, pa.repeat(chunk, count)],
        schema=EVENTS_SCHEMA,
    )


def bytes_batch(data: bytes, segment: str, at_offset: int, chunk: str) -> pa.RecordBatch:
    """One row of :data:`BYTES_SCHEMA`: ``data`` as read at ``at_offset`` from ``chunk``."""
    return pa.RecordBatch.from_arrays(
        [
            pa.array([segment], pa.string()),
            pa.array([at_offset], pa.int64()),
            pa.array([data], pa.binary()),
            pa.array([chunk], pa.string()),
        ],
        schema=BYTES_SCHEMA,
    )
