"""Probes and metrics, outside ``/v1`` and never behind auth: ``/healthz`` (the process
answers, and whether it takes writes), ``/readyz`` (it serves reads of every container it
holds) and ``/metrics``."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response

from segmentstore.api.errors import error_json
from segmentstore.api.metrics import CONTENT_TYPE, Metrics
from segmentstore.api.readiness import read_only_containers, readiness, writable
from segmentstore.api.schemas import container_json, error_responses
from segmentstore.cluster.membership import ClusterMembership
from segmentstore.contracts.errors import ContainerUnavailableError
from segmentstore.store import SegmentStore


def health_router(
    store: SegmentStore, metrics: Metrics, cluster: ClusterMembership | None = None
) -> APIRouter:
    router = APIRouter(tags=["operations"])

    @router.get(
        "/healthz",
        operation_id="getHealth",
        summary="Liveness: 200 while the process serves; whether it takes writes",
    )
    async def healthz() -> Response:
        # Always 200: a node that cannot take writes (Tier 1 full) still serves reads, and
        # restarting it would stop those too.
        read_only = [c.id for c in read_only_containers(store)]
        return JSONResponse(
            {
                "status": "ok",
                "writable": writable(store, cluster),
                "read_only_containers": read_only,
            }
        )

    @router.get(
        "/readyz",
        operation_id="getReadiness",
        responses=error_responses(ContainerUnavailableError),
        summary="Readiness: 200 once the node serves reads of every container it holds",
    )
    async def readyz() -> Response:
        state = readiness(store, cluster)
        if not state.ready:
            return error_json(
                ContainerUnavailableError.status,
                ContainerUnavailableError.code,
                state.why,
                {"containers": [container_json(c) for c in state.waiting]},
            )
        return JSONResponse({"status": "ready"})

    @router.get(
        "/metrics",
        operation_id="getMetrics",
        response_class=Response,
        responses={200: {"content": {CONTENT_TYPE: {"schema": {"type": "string"}}}}},
        summary="Prometheus text format",
    )
    async def prometheus() -> Response:
        return Response(metrics.render(), media_type=CONTENT_TYPE)

    return router
