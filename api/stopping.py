"""A request cut off because the server is stopping is answered ``503``, not ``500``.

When uvicorn's graceful shutdown runs out of time it cancels the requests still running (a tail
read that waits, a request whose body never came) and answers ``500`` for any that sent
nothing yet. Nothing went wrong with such a request: this node is going away. It is answered
``503 container_unavailable`` with ``Retry-After`` instead, so a client sends it again, to
another node of a cluster or to this one once it is back.
"""

from __future__ import annotations

import asyncio

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from segmentstore.api.errors import error_json


class StoppingMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracking)
        except asyncio.CancelledError:
            if started:
                raise
            answer = error_json(
                503, "container_unavailable", "this node is stopping: send the request again"
            )
            await answer(scope, receive, send)
