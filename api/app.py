"""The HTTP app factory: a thin shell over an embedded :class:`SegmentStore` (docs/api.md).

``create_app`` wires the routes, the one error mapping and the middlewares around a store
that the caller owns: the caller starts it before requests arrive and closes it after (see
:mod:`segmentstore.api.server`, which starts it first and closes it in the ASGI lifespan).
The data routes are answered first by the front door (:mod:`segmentstore.api.front_door`)
whenever none of the middlewares has anything to do for the request; every other request
passes, outermost first:

1. metrics (times everything, refusals included), and the 503 for a request cut off because
   the server is stopping (:mod:`segmentstore.api.stopping`);
2. auth (``401``/``403`` before anything else is looked at);
3. the body limit (``413`` before a large body is buffered);
4. control characters in a segment path (``400 invalid_name``: ``$`` matches before ``\n``);
5. in a cluster, to the node that holds the container (:mod:`segmentstore.api.cluster_routing`);
6. routing, then the route, whose errors the handlers of :mod:`segmentstore.api.errors` map.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager

from fastapi import FastAPI, Security
from fastapi.security import HTTPBearer
from starlette.routing import BaseRoute, Route
from starlette.types import Receive, Scope, Send

from segmentstore.api.append_path import AppendFastPath
from segmentstore.api.auth import TokenAuthMiddleware
from segmentstore.api.bodies import BodyLimitMiddleware
from segmentstore.api.cluster_collector import ClusterCollector
from segmentstore.api.cluster_routing import ClusterRouting
from segmentstore.api.errors import install_error_handlers
from segmentstore.api.forwarding import ForwardingSession
from segmentstore.api.front_door import FrontDoor
from segmentstore.api.metrics import Metrics, MetricsMiddleware
from segmentstore.api.node_collector import NodeCollector
from segmentstore.api.paths import ControlCharacterMiddleware
from segmentstore.api.routes.cluster import cluster_router
from segmentstore.api.routes.containers import containers_router
from segmentstore.api.routes.data import data_router
from segmentstore.api.routes.health import health_router
from segmentstore.api.routes.segments import action_router, resource_router
from segmentstore.api.status_page import status_page_router
from segmentstore.api.stopping import StoppingMiddleware
from segmentstore.cluster.membership import ClusterMembership
from segmentstore.store import SegmentStore

Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[None]]

DESCRIPTION = """\
A Pravega-style tiered segment store. Segment names may contain `/`; an action follows the
name after a colon (`POST /v1/segments/scope/stream/0:append`); `#` is sent as `%23`.
Errors are `{"error": {"code", "message", ...fields}}`. With tokens configured, `/v1` needs
`Authorization: Bearer TOKEN` with the role `read` (GET), `write` (changes) or `admin`
(container restart).
"""


class _FrontedApp(FastAPI):
    """FastAPI behind the front door: what the door takes never reaches FastAPI's stack."""

    front_door: FrontDoor | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        door = self.front_door
        if door is not None:
            request = door.take(scope)
            if request is not None:
                await door.serve(request, scope, receive, send)
                return
        await super().__call__(scope, receive, send)


def create_app(
    store: SegmentStore,
    auth_tokens: Mapping[str, str] | None = None,
    *,
    lifespan: Lifespan | None = None,
    cluster: ClusterMembership | None = None,
) -> FastAPI:
    """The app over ``store``. ``auth_tokens`` maps token to role (``read``, ``write``,
    ``admin``); none means open. ``ValueError`` on an unknown role."""
    bearer = HTTPBearer(auto_error=False, description="a token of role read, write or admin")
    app = _FrontedApp(
        title="segmentstore",
        version="1",
        description=DESCRIPTION,
        lifespan=lifespan,
        # Paths with a trailing "/" are names (an empty one is 400 invalid_name), not typos.
        redirect_slashes=False,
    )
    metrics = Metrics(node_name(store, cluster))
    app.state.metrics = metrics  # the server adds the figures of the connections it holds
    metrics.watch(store)
    metrics.registry.register(NodeCollector(store, cluster))
    install_error_handlers(app)

    # Documents the bearer scheme in OpenAPI when there is one; the middleware enforces it.
    v1 = [Security(bearer)] if auth_tokens else []
    # Order matters: the plain /v1/segments/{name} routes would match "name:action" as well
    # ({name} is a path parameter), so every route with an action is tried first.
    routers = [
        (data_router(store, metrics), v1),
        (action_router(store), v1),
        (resource_router(store), v1),
        (containers_router(store, cluster), v1),
        (cluster_router(store, cluster), v1),
        (health_router(store, metrics, cluster), []),
        (status_page_router(), []),  # static files; the page's script calls /v1 with a token
    ]
    for router, dependencies in routers:
        app.include_router(router, dependencies=dependencies)
    # Every route in the order the app tries them, for the metrics of requests refused before
    # routing (the app's own routes are the OpenAPI document and its viewers).
    routes: list[BaseRoute] = [r for r in app.router.routes if isinstance(r, Route)]
    routes += [r for router, _ in routers for r in router.routes]
    app.state.routes = routes
    metrics.expect_routes(routes)

    # add_middleware wraps what is there: the last added is the outermost.
    app.add_middleware(AppendFastPath, store=store, metrics=metrics)
    forwarding = forwarding_session(store, cluster)
    app.state.forwarding = forwarding
    if cluster is not None:
        app.add_middleware(ClusterRouting, store=store, membership=cluster, session=forwarding)
        metrics.registry.register(ClusterCollector(cluster, forwarding))
    app.add_middleware(ControlCharacterMiddleware)
    app.add_middleware(BodyLimitMiddleware, raw_limit=store.settings.store.max_append_bytes)
    if auth_tokens:
        app.add_middleware(TokenAuthMiddleware, tokens=dict(auth_tokens))
    app.add_middleware(StoppingMiddleware)
    app.add_middleware(MetricsMiddleware, metrics=metrics, routes=routes)
    app.front_door = FrontDoor(store, metrics, auth_tokens, cluster)
    return app


def node_name(store: SegmentStore, cluster: ClusterMembership | None) -> str:
    """This node's name for its metrics: its id in the cluster, or the host's name."""
    if cluster is not None:
        return cluster.node_id
    return store.settings.cluster.node_id or socket.gethostname().split(".")[0]


def forwarding_session(store: SegmentStore, cluster: ClusterMembership | None) -> ForwardingSession:
    """How this node passes requests on to the other nodes (none outside a cluster)."""
    if cluster is None:
        return ForwardingSession("", None)
    settings = store.settings.cluster
    return ForwardingSession(
        cluster.node_id,
        cluster.secret,
        connect_timeout_s=settings.forward_connect_timeout_ms / 1000,
        answer_timeout_s=settings.forward_answer_timeout_ms / 1000,
        max_per_peer=settings.max_forwards_per_peer,
    )
