"""What one pass over a request's headers finds: everything the gate and the data routes ask.

Each header the service reads on every request is picked out here, once, so that neither the
checks every request passes (auth, the body limit) nor the handlers of the busiest routes
scan the headers again. Where a header comes twice, the first one counts.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(slots=True)
class RequestHead:
    authorization: bytes | None = None
    content_length: bytes | None = None
    writer_id: bytes | None = None
    writer_seq: bytes | None = None
    writer_prev_seq: bytes | None = None


def read_head(headers: Iterable[tuple[bytes, bytes]]) -> RequestHead:
    """The headers of :class:`RequestHead` (names as the server gives them: lower case)."""
    head = RequestHead()
    for key, value in headers:
        if key == b"content-length":
            if head.content_length is None:
                head.content_length = value
        elif key == b"authorization":
            if head.authorization is None:
                head.authorization = value
        elif key == b"writer-id":
            if head.writer_id is None:
                head.writer_id = value
        elif key == b"writer-seq":
            if head.writer_seq is None:
                head.writer_seq = value
        elif key == b"writer-prev-seq" and head.writer_prev_seq is None:
            head.writer_prev_seq = value
    return head
