"""Segment paths with control characters are refused before routing.

Routes match with a regular expression anchored by ``$``, which in Python also matches just
before a final newline: ``PUT /v1/segments/s%0A`` would otherwise address the segment ``s``.
No valid name holds a control character (docs/api.md, Segment names), so any such path under
``/v1/segments/`` is ``400 invalid_name``, whatever follows.
"""

from __future__ import annotations

import re

from starlette.types import ASGIApp, Receive, Scope, Send

from segmentstore.api.errors import error_response
from segmentstore.contracts.errors import InvalidNameError

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_SEGMENTS = "/v1/segments/"


class ControlCharacterMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            path: str = scope["path"]
            if path.startswith(_SEGMENTS) and _CONTROL.search(path):
                name = path[len(_SEGMENTS) :]
                error = InvalidNameError(f"invalid segment name {name!r}: a control character")
                await error_response(error)(scope, receive, send)
                return
        await self.app(scope, receive, send)
