"""Request body limits: what a route accepts is refused with ``413`` before it is buffered.

Raw data (``:append``, ``:appendEvents``) may be up to the store's ``max_append_bytes``; every
other body is a small JSON document, capped at :data:`JSON_BODY_LIMIT`. A declared
``Content-Length`` over the limit is refused before a byte of the body is read; a body without
one (chunked) is counted as it streams in and refused as soon as it passes the limit, so no
request can make the server buffer more than the limit.

Every body that is not raw data is read as JSON whatever its declared type: ``curl -d`` sends
``application/x-www-form-urlencoded``, and refusing a well-formed JSON document over a header
would only surprise the people the API is for.
"""

from __future__ import annotations

from starlette.types import Message, Receive, Scope

from segmentstore.api.errors import BodyTooLarge
from segmentstore.contracts.errors import PayloadTooLargeError

# Attribute updates are the largest JSON bodies: this holds thousands of them.
JSON_BODY_LIMIT = 1 << 20

RAW_BODY_ACTIONS = (":append", ":appendEvents")


def as_json(scope: Scope) -> None:
    """Every body that is not raw data is read as JSON (see above)."""
    # In place, not a copy: the router records the matched route in this scope, and the
    # gate reads it from there for the metrics.
    headers = [(k, v) for k, v in scope["headers"] if k != b"content-type"]
    headers.append((b"content-type", b"application/json"))
    scope["headers"] = headers


class BodyLimits:
    def __init__(self, raw_limit: int, json_limit: int = JSON_BODY_LIMIT) -> None:
        self.raw_limit = raw_limit
        self.json_limit = json_limit

    def limit_for(self, path: str) -> int:
        return self.raw_limit if path.endswith(RAW_BODY_ACTIONS) else self.json_limit

    def refusal(self, path: str, declared: bytes | None) -> PayloadTooLargeError | None:
        """A declared ``Content-Length`` over the path's limit, refused before a byte of the
        body is read (the server drains and drops the unread body, which keeps the connection
        usable and lets the client read the answer). The HTTP server has already refused a
        malformed ``Content-Length``."""
        if declared is None:
            return None
        limit = self.limit_for(path)
        size = int(declared)
        return PayloadTooLargeError(size, limit) if size > limit else None

    def counting(self, receive: Receive, path: str) -> Receive:
        """``receive`` for a body without a declared length (chunked): it raises
        :class:`BodyTooLarge` as soon as the body passes the path's limit."""
        limit = self.limit_for(path)
        received = 0

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge(PayloadTooLargeError(received, limit))
            return message

        return counting_receive
