"""The one exception tree of the segment store: each error is declared here, once.

An error's class carries everything said of it anywhere: its ``code`` on the wire, the HTTP
``status`` it is answered with, whether a client should send the request again after a wait
(``retry_after``), and its fields. The rest is derived from the classes: the HTTP answer
(``api/errors.py``), the public exports (``segmentstore``), the client's exceptions and its
retries (``segmentstore.client``), the error answers in the OpenAPI document, and the table
of docs/api.md, which a test holds to them (tests/contracts/test_errors.py, as this tree).

    SegmentStoreError                      code (docs/api.md, Errors)
    ├── InvalidNameError                   invalid_name
    ├── InvalidArgumentError               invalid_argument
    ├── UnauthorizedError                  unauthorized
    ├── ForbiddenError                     forbidden
    ├── SegmentNotFoundError               segment_not_found
    ├── ContainerNotFoundError             container_not_found
    ├── RequestTimeoutError                request_timeout        (timeout_ms)
    ├── SegmentExistsError                 segment_exists
    ├── SegmentSealedError                 segment_sealed
    ├── SegmentTruncatedError              segment_truncated      (start_offset)
    ├── BadOffsetError                     bad_offset             (expected_offset, length)
    ├── BadAttributeUpdateError            bad_attribute_update   (key)
    ├── WriterSeqMismatchError             writer_seq_mismatch    (writer_prev_seq, last_writer_seq)
    ├── PayloadTooLargeError               payload_too_large      (limit)
    ├── RequestHeaderTooLargeError         request_header_too_large (limit)
    ├── OffsetBeyondEndError               offset_beyond_end      (offset, length)
    ├── EndOfSegmentError                  end_of_segment         (length)
    ├── InvalidEventsError                 invalid_events
    ├── ThrottledError                     throttled              (retry_after_ms)
    ├── ContainerUnavailableError          container_unavailable  (container, retry_after_ms)
    ├── InsufficientStorageError           insufficient_storage
    ├── DataCorruptedError                 data_corrupted         (segment, chunk, start, end)
    └── ContainerFailureError              never on the wire: why a container stopped for good
        ├── DataCorruptionError            Tier 1 holds what cannot have been written
        │   ├── FrameFormatError               (logs/data_frame.py) a frame that does not parse
        │   └── LogReplayError                 (logs/operations.py) an operation that does not fit
        └── Tier2ReconciliationError       Tier 2 holds more of a segment than Tier 1 knows of

Each leaf carries its fields as attributes; :meth:`SegmentStoreError.fields` lists them for the
wire, so no caller has to parse a message. A :class:`ContainerFailureError` is the reason a
container went offline and stays there until someone acts; requests to that container are
answered ``ContainerUnavailableError`` with its message, so it is never sent itself
(``on_the_wire`` is false, and :func:`leaf_error_classes` leaves it out).
"""

from __future__ import annotations

from typing import Any, ClassVar


class SegmentStoreError(Exception):
    # The error's code on the wire, and the HTTP status it is answered with.
    code: ClassVar[str] = "internal"
    status: ClassVar[int] = 500
    # A client may send the request again once the wait the answer names has passed
    # (``Retry-After``, and ``retry_after_ms`` where the error has it); nothing else is retried
    # on its answer.
    retry_after: ClassVar[bool] = False
    _field_names: ClassVar[tuple[str, ...]] = ()
    on_the_wire: ClassVar[bool] = True

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def fields(self) -> dict[str, Any]:
        """The structured fields of this error, as they go into the error body."""
        return {name: getattr(self, name) for name in self._field_names}


class InvalidNameError(SegmentStoreError):
    code = "invalid_name"
    status = 400


class InvalidArgumentError(SegmentStoreError):
    code = "invalid_argument"
    status = 400


class UnauthorizedError(SegmentStoreError):
    code = "unauthorized"
    status = 401


class ForbiddenError(SegmentStoreError):
    code = "forbidden"
    status = 403


class SegmentNotFoundError(SegmentStoreError):
    code = "segment_not_found"
    status = 404

    def __init__(self, name: str) -> None:
        super().__init__(f"segment {name!r} does not exist")
        self.name = name


class ContainerNotFoundError(SegmentStoreError):
    code = "container_not_found"
    status = 404

    def __init__(self, container: int) -> None:
        super().__init__(f"container {container} is not served here")
        self.container = container


class RequestTimeoutError(SegmentStoreError):
    """A request stopped arriving: nothing of it was applied."""

    code = "request_timeout"
    status = 408
    _field_names = ("timeout_ms",)

    def __init__(self, timeout_ms: int, *, head: bool = False) -> None:
        if head:  # its head did not arrive whole in time, however slowly it kept coming
            why = f"its request line and headers did not arrive whole within {timeout_ms} ms"
        else:
            why = f"nothing came for {timeout_ms} ms"
        super().__init__(f"the request stopped arriving: {why}, and nothing of it was applied")
        self.timeout_ms = timeout_ms


class SegmentExistsError(SegmentStoreError):
    code = "segment_exists"
    status = 409

    def __init__(self, name: str) -> None:
        super().__init__(f"segment {name!r} already exists")
        self.name = name


class SegmentSealedError(SegmentStoreError):
    code = "segment_sealed"
    status = 409

    def __init__(self, name: str) -> None:
        super().__init__(f"segment {name!r} is sealed")
        self.name = name


class SegmentTruncatedError(SegmentStoreError):
    code = "segment_truncated"
    status = 410
    _field_names = ("start_offset",)

    def __init__(self, name: str, start_offset: int) -> None:
        super().__init__(f"segment {name!r} is truncated below offset {start_offset}")
        self.name = name
        self.start_offset = start_offset


class BadOffsetError(SegmentStoreError):
    code = "bad_offset"
    status = 412
    _field_names = ("expected_offset", "length")

    def __init__(self, name: str, expected_offset: int, length: int) -> None:
        super().__init__(
            f"segment {name!r} has length {length}, not the expected offset {expected_offset}"
        )
        self.name = name
        self.expected_offset = expected_offset
        self.length = length


class WriterSeqMismatchError(SegmentStoreError):
    """A chained append (``Writer-Prev-Seq``) whose predecessor is not the writer's last
    applied batch on the segment: ``last_writer_seq`` is the one the store has (None: this
    writer has applied nothing there). Nothing was appended."""

    code = "writer_seq_mismatch"
    status = 412
    _field_names = ("writer_prev_seq", "last_writer_seq")

    def __init__(self, name: str, writer_prev_seq: int, last_writer_seq: int | None) -> None:
        has = "no batch" if last_writer_seq is None else f"Writer-Seq {last_writer_seq}"
        super().__init__(
            f"segment {name!r} has {has} last applied for this writer,"
            f" not the Writer-Prev-Seq {writer_prev_seq}"
        )
        self.name = name
        self.writer_prev_seq = writer_prev_seq
        self.last_writer_seq = last_writer_seq


class BadAttributeUpdateError(SegmentStoreError):
    code = "bad_attribute_update"
    status = 412
    _field_names = ("key",)

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"attribute {key!r}: {reason}")
        self.key = key


class PayloadTooLargeError(SegmentStoreError):
    code = "payload_too_large"
    status = 413
    _field_names = ("limit",)

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"{size} bytes is more than the limit of {limit}")
        self.limit = limit


class RequestHeaderTooLargeError(SegmentStoreError):
    code = "request_header_too_large"
    status = 431
    _field_names = ("limit",)

    def __init__(self, limit: int) -> None:
        super().__init__(f"the request line and headers are over the limit of {limit} bytes")
        self.limit = limit


class OffsetBeyondEndError(SegmentStoreError):
    code = "offset_beyond_end"
    status = 416
    _field_names = ("offset", "length")

    def __init__(self, name: str, offset: int, length: int) -> None:
        super().__init__(f"offset {offset} is beyond the end ({length}) of segment {name!r}")
        self.offset = offset
        self.length = length


class EndOfSegmentError(SegmentStoreError):
    code = "end_of_segment"
    status = 416
    _field_names = ("length",)

    def __init__(self, name: str, length: int) -> None:
        super().__init__(f"segment {name!r} is sealed at length {length}")
        self.length = length


class InvalidEventsError(SegmentStoreError):
    code = "invalid_events"
    status = 422


class ThrottledError(SegmentStoreError):
    code = "throttled"
    status = 429
    retry_after = True
    _field_names = ("retry_after_ms",)

    def __init__(self, reason: str, retry_after_ms: int) -> None:
        super().__init__(f"throttled: {reason}")
        self.retry_after_ms = retry_after_ms


class ContainerUnavailableError(SegmentStoreError):
    code = "container_unavailable"
    status = 503
    retry_after = True
    _field_names = ("container", "retry_after_ms")

    def __init__(self, container: int, reason: str, retry_after_ms: int = 1000) -> None:
        super().__init__(f"container {container} is unavailable: {reason}")
        self.container = container
        self.retry_after_ms = retry_after_ms


class InsufficientStorageError(SegmentStoreError):
    code = "insufficient_storage"
    status = 507


class DataCorruptedError(SegmentStoreError):
    """Tier 2 bytes ``[start, end)`` of ``segment`` (in ``chunk``) do not match the checksum
    written with them, or are missing from a short chunk: never returned as data, and not
    worth retrying as they are (a person must restore them)."""

    code = "data_corrupted"
    # Tier 2 answered with bytes that fail their checksum: the store, a gateway to Tier 2, got
    # a bad answer from it. Not 503: retrying will not mend them.
    status = 502
    _field_names = ("segment", "chunk", "start", "end")

    def __init__(self, segment: str, chunk: str, start: int, end: int, reason: str) -> None:
        super().__init__(
            f"bytes [{start}, {end}) of segment {segment!r} in Tier 2 chunk {chunk} are"
            f" damaged: {reason}"
        )
        self.segment = segment
        self.chunk = chunk
        self.start = start
        self.end = end


class ContainerFailureError(SegmentStoreError):
    """Why a container stopped for good: recovering it again cannot get past this."""

    code = "container_failed"
    on_the_wire = False


class DataCorruptionError(ContainerFailureError):
    """Tier 1 holds a record that passed its checksum but cannot have been written by a
    correct owner: the container stops rather than guess."""

    code = "data_corruption"


class Tier2ReconciliationError(ContainerFailureError):
    """Tier 2 holds more of a segment than Tier 1 says it has: acknowledged data was lost from
    Tier 1, and a person must look."""

    code = "tier2_ahead_of_tier1"

    def __init__(self, name: str, tier2_length: int, length: int) -> None:
        super().__init__(
            f"Tier 2 holds {tier2_length} bytes of {name!r}, more than its length {length}:"
            " Tier 1 lost acknowledged data"
        )
        self.name = name
        self.tier2_length = tier2_length
        self.length = length


def public_error_classes() -> list[type[SegmentStoreError]]:
    """The root and every leaf an answer can carry: what ``segmentstore`` exports."""
    return [SegmentStoreError, *leaf_error_classes()]


def leaf_error_classes() -> list[type[SegmentStoreError]]:
    """Every error class an answer can carry (for the HTTP mapping and the test that checks it
    is total, and for the client, which rebuilds them from their codes)."""
    found: list[type[SegmentStoreError]] = []
    pending: list[type[SegmentStoreError]] = [SegmentStoreError]
    while pending:
        cls = pending.pop()
        subclasses = [sub for sub in cls.__subclasses__() if sub.on_the_wire]
        if not subclasses and cls is not SegmentStoreError:
            found.append(cls)
        pending.extend(subclasses)
    return sorted(found, key=lambda c: c.__name__)
