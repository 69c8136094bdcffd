"""A client for the segment store's HTTP API (docs/api.md): blocking (on httpx) or asyncio
(over its own HTTP/1.1 connections), and a batching, exactly-once event writer and a
tail-following event reader.

    from segmentstore.client import SegmentStoreClient

    with SegmentStoreClient("http://127.0.0.1:9090", token="...") as store:
        store.create_segment("scope/stream/0")
        r = store.append("scope/stream/0", b"hello", writer_id="w1", writer_seq=0)
        data = store.read("scope/stream/0", 0, wait_ms=1000).data

Method names, arguments and results follow the embedded :class:`~segmentstore.SegmentStore`
(``SegmentInfo``, ``AppendResult``); reads also return the ``Segment-*`` headers.
:class:`EventWriter` (and its blocking twin :class:`BlockingEventWriter`) batches records into
``:appendEvents`` requests and gives each its durable offset; :class:`EventReader` iterates a
segment's events. Errors:

    SegmentStoreError           every error answer: the leaf of its code (BadOffsetError with
    └── (the leaves)            expected_offset and length, ...); unknown codes the root
    httpx.TransportError        the server could not be reached or answered nothing, after
                                the retries that were safe (see :mod:`.retry`); the asyncio
                                client's transport raises the same classes
    UnknownOffsetError          an EventWriter batch applied once whose offset is unknown
    WriterClosedError           a write to a closed EventWriter

The ``name`` of a segment error is the segment the request addressed (the server does not
send it; for a merge whose source is missing it is still the target). The client imports
httpx and :mod:`segmentstore.contracts` (errors, results, the event framing, the segment ->
container mapping), nothing else of the server: importing it loads neither the store nor its
backends, FastAPI or pydantic.
May import: ``contracts``.
"""

from segmentstore.client.async_client import AsyncSegmentStoreClient
from segmentstore.client.blocking_event_writer import BlockingEventWriter
from segmentstore.client.event_reader import EventReader
from segmentstore.client.event_writer import (
    EventAck,
    EventWriter,
    UnknownOffsetError,
    WriterClosedError,
)
from segmentstore.client.results import (
    ContainerState,
    EventsReadResult,
    ReadResult,
    SegmentPage,
)
from segmentstore.client.retry import RetryPolicy
from segmentstore.client.sync_client import SegmentStoreClient

__all__ = [
    "AsyncSegmentStoreClient",
    "BlockingEventWriter",
    "ContainerState",
    "EventAck",
    "EventReader",
    "EventWriter",
    "EventsReadResult",
    "ReadResult",
    "RetryPolicy",
    "SegmentPage",
    "SegmentStoreClient",
    "UnknownOffsetError",
    "WriterClosedError",
]
