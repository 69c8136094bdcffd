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

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from segmentstore.api.errors import BodyTooLarge, error_response
from segmentstore.contracts.errors import PayloadTooLargeError

# Attribute updates are the largest JSON bodies: this holds thousands of them.
JSON_BODY_LIMIT = 1 << 20

RAW_BODY_ACTIONS = (":append", ":appendEvents")


def _declared_length(scope: Scope) -> int | None:
    for key, value in scope["headers"]:
        if key == b"content-length":
            # The HTTP server has already refused a malformed Content-Length.
            return int(value)
    return None


def _as_json(scope: Scope) -> None:
    # In place, not a copy: the router records the matched route in this scope, and the
    # metrics middleware outside reads it from there.
    headers = [(k, v) for k, v in scope["headers"] if k != b"content-type"]
    headers.append((b"content-type", b"application/json"))
    scope["headers"] = headers


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, raw_limit: int, json_limit: int = JSON_BODY_LIMIT) -> None:
        self.app = app
        self.raw_limit = raw_limit
        self.json_limit = json_limit

    def limit_for(self, path: str) -> int:
        return self.raw_limit if path.endswith(RAW_BODY_ACTIONS) else self.json_limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit_for(scope["path"])
        if limit == self.json_limit:
            _as_json(scope)
        declared = _declared_length(scope)
        if declared is not None:
            if declared > limit:
                # The unread body is drained and dropped by the server, which keeps the
                # connection usable and lets the client read this answer.
                await error_response(PayloadTooLargeError(declared, limit))(scope, receive, send)
                return
            await self.app(scope, receive, send)  # the server delivers no more than declared
            return

        received = 0

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge(PayloadTooLargeError(received, limit))
            return message

        await self.app(scope, counting_receive, send)
