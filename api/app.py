"""The HTTP app factory: a thin shell over an embedded :class:`SegmentStore` (docs/api.md).

``create_app`` wires the routes, the one error mapping and the gate around a store that the
caller owns: the caller starts it before requests arrive and closes it after (see
:mod:`segmentstore.api.server`, which starts it first and closes it in the ASGI lifespan).
Every request comes in through the gate (:mod:`segmentstore.api.gate`), which passes it
through the checks every request passes, once, and on to its route's one handler: the data
routes' (:mod:`segmentstore.api.routes.data`) directly, every other route's through FastAPI.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any

from fastapi import FastAPI, Security
from fastapi.security import HTTPBearer
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from segmentstore.api.auth import TokenAuth
from segmentstore.api.bodies import BodyLimits
from segmentstore.api.cluster_collector import ClusterCollector
from segmentstore.api.cluster_routing import ClusterRouting
from segmentstore.api.errors import install_error_handlers
from segmentstore.api.forwarding import ForwardingSession
from segmentstore.api.gate import Gate
from segmentstore.api.metrics import Metrics
from segmentstore.api.node_collector import NodeCollector
from segmentstore.api.routes.cluster import cluster_router
from segmentstore.api.routes.containers import containers_router
from segmentstore.api.routes.data import DataRoutes
from segmentstore.api.routes.data_route import document
from segmentstore.api.routes.health import health_router
from segmentstore.api.routes.segments import action_router, resource_router
from segmentstore.api.status_page import status_page_router
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


class ServiceApp(FastAPI):
    """FastAPI behind the gate: every request comes in through ``gate``; FastAPI's own stack
    serves the routes it holds (every route but the data routes) and the lifespan."""

    gate: Gate
    data_routes: DataRoutes
    _bearer = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.gate(scope, receive, send)

    async def framework(self, scope: Scope, receive: Receive, send: Send) -> None:
        await super().__call__(scope, receive, send)

    def openapi(self) -> dict[str, Any]:
        """FastAPI's document of its routes, with the data routes from their declarations."""
        schema = super().openapi()
        security: list[dict[str, list[str]]] = [{"HTTPBearer": []}] if self._bearer else []
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        document(schema["paths"], components, self.data_routes.all, security)
        return schema


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
    app = ServiceApp(
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

    # Documents the bearer scheme in OpenAPI when there is one; the gate enforces it.
    v1 = [Security(bearer)] if auth_tokens else []
    app._bearer = bool(auth_tokens)
    # Order matters: the plain /v1/segments/{name} routes would match "name:action" as well
    # ({name} is a path parameter), so every route with an action is tried first.
    routers = [
        (action_router(store), v1),
        (resource_router(store), v1),
        (containers_router(store, cluster), v1),
        (cluster_router(store, cluster), v1),
        (health_router(store, metrics, cluster), []),
        (status_page_router(), []),  # static files; the page's script calls /v1 with a token
    ]
    for router, dependencies in routers:
        app.include_router(router, dependencies=dependencies)
    app.data_routes = DataRoutes(store, metrics)
    # Every route in the order the app tries them, for the metrics of requests refused before
    # routing (the app's own routes are the OpenAPI document and its viewers).
    routes: list[BaseRoute] = [*app.data_routes.all]
    routes += [r for r in app.router.routes if isinstance(r, Route)]
    routes += [r for router, _ in routers for r in router.routes]
    app.state.routes = routes
    metrics.expect_routes(routes)

    limits = BodyLimits(raw_limit=store.settings.store.max_append_bytes)
    app.gate = Gate(app.framework, app.data_routes, metrics, routes, TokenAuth(auth_tokens), limits)
    forwarding = forwarding_session(store, cluster)
    app.state.forwarding = forwarding
    if cluster is not None:
        membership = cluster

        def routing(here: ASGIApp) -> ASGIApp:
            return ClusterRouting(here, store=store, membership=membership, session=forwarding)

        app.gate.route_with(routing)
        metrics.registry.register(ClusterCollector(cluster, forwarding))
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
