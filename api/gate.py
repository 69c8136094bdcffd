"""Every request's one way in: the checks every request passes, once, then its one handler.

The gate is the app's ASGI entry (:func:`segmentstore.api.app.create_app`). It looks at a
request's path and makes one pass over its headers (:mod:`.head`), then, in this order:

1. times it for the metrics, whatever happens next, refusals included (:mod:`.metrics`);
2. auth: ``401``/``403`` before anything else is looked at (:mod:`.auth`);
3. the body limit: ``413`` for a declared body over it, and a body without a declared
   length counted as it streams in (:mod:`.bodies`);
4. control characters in a segment path: ``400 invalid_name`` (:mod:`.paths`);
5. in a cluster, to the node that holds the container (:mod:`.cluster_routing`);
6. the route's one handler: a data route's (:mod:`.routes.data`) straight from here, every
   other through FastAPI's routing, validation and exception handlers.

Whatever the handler, a request that the stopping server cuts off before it answered gets
``503`` (:mod:`.stopping`), and an exception nothing mapped the last-resort ``500``
(:func:`segmentstore.api.errors.internal_error`). Every error answer has the one shape of
:mod:`.errors`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence

from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from segmentstore.api.auth import TokenAuth
from segmentstore.api.bodies import BodyLimits, as_json
from segmentstore.api.errors import error_response, internal_error
from segmentstore.api.head import read_head
from segmentstore.api.metrics import Metrics, route_template
from segmentstore.api.paths import control_character_refusal
from segmentstore.api.routes.data import DataRoutes
from segmentstore.api.routes.data_route import DATA_REQUEST
from segmentstore.api.stopping import stopping_answer


class Gate:
    """The way in to ``framework`` (the FastAPI app, for every route but the data routes)."""

    def __init__(
        self,
        framework: ASGIApp,
        data: DataRoutes,
        metrics: Metrics,
        routes: Sequence[BaseRoute],
        auth: TokenAuth,
        limits: BodyLimits,
    ) -> None:
        self._framework = framework
        self._data = data
        self._metrics = metrics
        self._routes = routes
        self._auth = auth
        self._limits = limits
        self._routing: ASGIApp | None = None

    def route_with(self, routing: Callable[[ASGIApp], ASGIApp]) -> None:
        """Pass each request, once checked, to ``routing(serve_here)`` (a cluster's routing,
        which serves here what this node holds and forwards the rest)."""
        self._routing = routing(self.serve_here)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._framework(scope, receive, send)  # the lifespan
            return
        started = time.perf_counter()
        status = 0  # nothing answered yet

        async def answering(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        method: str = scope["method"]
        path: str = scope["path"]
        head = read_head(scope["headers"])
        request = self._data.match(method, path, head)
        try:
            refusal = (
                self._auth.refusal(method, path, head.authorization)
                or self._limits.refusal(path, head.content_length)
                or control_character_refusal(path)
            )
            if refusal is not None:
                await error_response(refusal)(scope, receive, answering)
                return
            if head.content_length is None:
                receive = self._limits.counting(receive, path)
            if self._routing is not None:
                if request is not None:
                    scope[DATA_REQUEST] = request
                await self._routing(scope, receive, answering)
            elif request is not None:
                await request.route.handler(request, scope, receive, answering)
            else:
                await self._serve_framework(scope, receive, answering)
        except asyncio.CancelledError:
            # uvicorn cancels what still runs when its graceful shutdown runs out; an answer
            # half sent can only be cut off.
            if status:
                raise
            await stopping_answer()(scope, receive, answering)
        except Exception as error:
            if status:
                raise  # the answer was half sent: only closing the connection tells the client
            await internal_error(method, path, error)(scope, receive, answering)
        finally:
            # A client gone before its answer counts as 500.
            seconds = time.perf_counter() - started
            if request is not None:
                request.route.observe(status or 500, seconds)
            else:
                template = route_template(scope, self._routes)
                self._metrics.observe(method, template, status or 500, seconds)

    async def serve_here(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The request's handler on this node (what a cluster's routing calls)."""
        request = scope.get(DATA_REQUEST)
        if request is not None:
            await request.route.handler(request, scope, receive, send)
        else:
            await self._serve_framework(scope, receive, send)

    async def _serve_framework(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._limits.limit_for(scope["path"]) == self._limits.json_limit:
            as_json(scope)
        await self._framework(scope, receive, send)
