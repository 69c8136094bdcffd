"""``GET /v1/cluster``: the nodes and which of them holds each container, at which epoch.

A client that sends each request to its container's owner directly reads this map (and reads
it again when an answer carries ``Segment-Owner``: its map was stale). A single node answers
no nodes and no owners: everything is served where it is asked.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response

from segmentstore.api.schemas import ClusterMap
from segmentstore.cluster.membership import ClusterMembership
from segmentstore.store import SegmentStore


def cluster_router(store: SegmentStore, cluster: ClusterMembership | None) -> APIRouter:
    router = APIRouter(prefix="/v1/cluster", tags=["containers"])

    @router.get(
        "",
        operation_id="getCluster",
        response_model=ClusterMap,
        summary="The nodes, and the node that holds each container",
    )
    async def describe() -> Response:
        if cluster is not None:
            return JSONResponse(cluster.describe())
        containers = [{"id": c.id, "owner": None, "epoch": c.epoch} for c in store.containers]
        return JSONResponse(
            {
                "node": None,
                "leases_held": None,
                "nodes": [],
                "missing": [],
                "containers": containers,
            }
        )

    return router
