"""Containers: ``GET /v1/containers`` and ``POST /v1/containers/{id}:restart`` (for drills)."""

from __future__ import annotations

import asyncio
import re
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response

from segmentstore.api.schemas import Containers, ContainerView, container_json, error_responses
from segmentstore.cluster.membership import ClusterMembership
from segmentstore.cluster.ownership import ContainerOwnership
from segmentstore.containers.container import SegmentContainer
from segmentstore.containers.status import ContainerStatus
from segmentstore.contracts.errors import (
    ContainerNotFoundError,
    ContainerUnavailableError,
    InsufficientStorageError,
    InvalidArgumentError,
)
from segmentstore.store import SegmentStore

_INTEGER = re.compile(r"-?[0-9]+")


def containers_router(store: SegmentStore, cluster: ContainerOwnership | None) -> APIRouter:
    router = APIRouter(prefix="/v1/containers", tags=["containers"])
    # A container is stopped and started in two awaits; two restarts interleaving would start
    # it twice. Restarts are rare (drills), so one at a time is plenty.
    restarting = asyncio.Lock()

    def view(container: SegmentContainer) -> dict[str, Any]:
        # Taken over from another node: a cluster's; a node's workers own fixed shares.
        membership = cluster if isinstance(cluster, ClusterMembership) else None
        takeovers = 0 if membership is None else membership.takeovers.get(container.id, 0)
        return container_json(container, takeovers)

    @router.get(
        "",
        operation_id="listContainers",
        response_model=Containers,
        summary="Every container's state",
    )
    async def list_containers() -> Response:
        return JSONResponse({"containers": [view(c) for c in store.containers]})

    @router.post(
        "/{container_id}:restart",
        operation_id="restartContainer",
        response_model=ContainerView,
        responses=error_responses(
            InvalidArgumentError,
            ContainerNotFoundError,
            ContainerUnavailableError,
            InsufficientStorageError,
        ),
        summary="Stop a container and recover it in place; answers once it runs again",
    )
    async def restart(container_id: str) -> Response:
        # Parsed here rather than typed ``int`` so that "1_0" or "+1" are not containers.
        if not _INTEGER.fullmatch(container_id):
            raise InvalidArgumentError(f"a container id is an integer, not {container_id!r}")
        wanted = store.container(int(container_id))  # 404 before waiting for the lock
        async with restarting:
            container = await store.restart_container(wanted.id)
        if container.status is not ContainerStatus.RUNNING:
            raise ContainerUnavailableError(
                container.id, container.failure or container.status.value
            )
        answer = view(container)
        answer["owner"] = None if cluster is None else cluster.node_id
        return JSONResponse(answer)

    return router
