"""Segments as resources: create, info, delete, list, and the actions that are not data paths
(``:seal``, ``:truncate``, ``:merge``, ``:beginTransaction``, ``:attributes``, ``:offsetAt``,
``:retention``).

``{name}`` may contain ``/`` (a ``path`` parameter) and never contains ``:``, so the routes
with an action are tried before the plain ``/v1/segments/{name}`` ones (the order is fixed in
:func:`segmentstore.api.app.create_app`). A ``:`` that still reaches a plain route, or a
``POST``/``PATCH`` without a known action, is an unknown action: ``400 invalid_argument``.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Query, Request
from fastapi.responses import JSONResponse, Response

from segmentstore.api.schemas import (
    BAD_REQUEST,
    SEGMENT_ERRORS,
    Attributes,
    CreateSegment,
    Info,
    Listing,
    Merge,
    Merged,
    OffsetAt,
    Retention,
    Transaction,
    Truncate,
    UpdateAttributes,
    error_responses,
)
from segmentstore.contracts.errors import (
    BadAttributeUpdateError,
    ContainerUnavailableError,
    InvalidArgumentError,
    OffsetBeyondEndError,
    SegmentExistsError,
    SegmentSealedError,
    SegmentTruncatedError,
)
from segmentstore.contracts.segment_info import SegmentInfo
from segmentstore.store import SegmentStore

# A page of GET /v1/segments, of one node's and of a cluster's merged listing alike.
DEFAULT_LIST_LIMIT = 100
MAX_LIST_LIMIT = 1000


def _info(info: SegmentInfo, status: int = 200) -> JSONResponse:
    return JSONResponse(info.to_dict(), status_code=status)


def _plain(name: str, method: str) -> str:
    """The name of a route without an action; a ``:`` means an action this method lacks."""
    if ":" in name:
        action = name.rsplit(":", 1)[1]
        raise InvalidArgumentError(f"unknown action {action!r} for {method}")
    return name


def action_router(store: SegmentStore) -> APIRouter:
    router = APIRouter(prefix="/v1/segments", tags=["segments"])

    @router.post(
        "/{name:path}:seal",
        operation_id="sealSegment",
        response_model=Info,
        responses=error_responses(*SEGMENT_ERRORS),
        summary="Seal: no more appends (idempotent)",
    )
    async def seal(name: str) -> Response:
        return _info(await store.seal(name))

    @router.post(
        "/{name:path}:truncate",
        operation_id="truncateSegment",
        response_model=Info,
        responses=error_responses(*SEGMENT_ERRORS, OffsetBeyondEndError),
        summary="Drop the data below an offset for good",
    )
    async def truncate(name: str, body: Truncate) -> Response:
        return _info(await store.truncate(name, body.offset))

    @router.post(
        "/{name:path}:merge",
        operation_id="mergeSegment",
        response_model=Merged,
        responses=error_responses(*SEGMENT_ERRORS, SegmentSealedError, SegmentTruncatedError),
        summary="Append a whole source segment (a transaction) to this one, atomically",
    )
    async def merge(name: str, body: Merge) -> Response:
        result = await store.merge(name, body.source)
        return JSONResponse({"offset": result.offset, "length": result.length})

    @router.post(
        "/{name:path}:beginTransaction",
        operation_id="beginTransaction",
        status_code=201,
        response_model=Transaction,
        responses=error_responses(*SEGMENT_ERRORS, SegmentSealedError),
        summary="Create a transaction segment of this segment",
    )
    async def begin_transaction(name: str) -> Response:
        transaction = await store.begin_transaction(name)
        return JSONResponse({"transaction": transaction}, status_code=201)

    @router.get(
        "/{name:path}:attributes",
        operation_id="getAttributes",
        response_model=Attributes,
        responses=error_responses(*SEGMENT_ERRORS),
        summary="The segment's attributes",
    )
    async def get_attributes(name: str) -> Response:
        return JSONResponse({"attributes": await store.get_attributes(name)})

    @router.patch(
        "/{name:path}:attributes",
        operation_id="updateAttributes",
        response_model=Attributes,
        responses=error_responses(*SEGMENT_ERRORS, BadAttributeUpdateError),
        summary="Update attributes atomically; answers the whole map after the update",
    )
    async def update_attributes(name: str, body: UpdateAttributes) -> Response:
        updates = [update.model_dump() for update in body.updates]
        return JSONResponse({"attributes": await store.update_attributes(name, updates)})

    @router.get(
        "/{name:path}:offsetAt",
        operation_id="offsetAt",
        response_model=OffsetAt,
        responses=error_responses(*SEGMENT_ERRORS),
        summary="An append boundary at or before the first append made at or after a time",
    )
    async def offset_at(
        name: str, timestamp_ms: Annotated[int, Query(description="milliseconds since epoch")]
    ) -> Response:
        return JSONResponse({"offset": await store.offset_at(name, timestamp_ms)})

    @router.put(
        "/{name:path}:retention",
        operation_id="setRetention",
        response_model=Info,
        responses=error_responses(*SEGMENT_ERRORS),
        summary="Replace the retention policy ({} keeps everything)",
    )
    async def set_retention(name: str, body: Retention) -> Response:
        return _info(await store.set_retention(name, body.model_dump(exclude_none=True)))

    return router


def resource_router(store: SegmentStore) -> APIRouter:
    router = APIRouter(prefix="/v1/segments", tags=["segments"])

    @router.get(
        "",
        operation_id="listSegments",
        response_model=Listing,
        responses=error_responses(*BAD_REQUEST, ContainerUnavailableError),
        summary="Segment names, sorted by code point, a page at a time",
    )
    async def list_segments(
        prefix: Annotated[str, Query(description="only names starting with this")] = "",
        limit: Annotated[
            int, Query(description="page size: default 100, at most 1000 (more is capped)")
        ] = DEFAULT_LIST_LIMIT,
        after: Annotated[
            str | None, Query(description="the previous page's `next`: names after it")
        ] = None,
    ) -> Response:
        if limit < 1:
            raise InvalidArgumentError(f"limit must be at least 1, not {limit}")
        page = min(limit, MAX_LIST_LIMIT)
        # One more than the page tells whether there is a next page without a second query.
        names = await store.list_segments(prefix, after=after, limit=page + 1)
        more = len(names) > page
        names = names[:page]
        return JSONResponse({"segments": names, "next": names[-1] if more else None})

    @router.put(
        "/{name:path}",
        operation_id="createSegment",
        status_code=201,
        response_model=Info,
        responses=error_responses(*BAD_REQUEST, SegmentExistsError, ContainerUnavailableError),
        summary="Create a segment",
    )
    async def create_segment(
        name: str, body: Annotated[CreateSegment | None, Body()] = None
    ) -> Response:
        settings = body or CreateSegment()
        retention = (
            None if settings.retention is None else settings.retention.model_dump(exclude_none=True)
        )
        info = await store.create_segment(_plain(name, "PUT"), settings.attributes, retention)
        return _info(info, status=201)

    @router.delete(
        "/{name:path}",
        operation_id="deleteSegment",
        status_code=204,
        response_class=Response,
        responses=error_responses(*SEGMENT_ERRORS),
        summary="Delete a segment (also from Tier 2); a transaction's abort",
    )
    async def delete_segment(name: str) -> Response:
        await store.delete_segment(_plain(name, "DELETE"))
        return Response(status_code=204)

    # A plain GET of a segment is a data route (api/routes/data.py): what reaches this route
    # with GET names an action that GET does not have.
    @router.api_route("/{name:path}", methods=["GET", "POST", "PATCH"], include_in_schema=False)
    async def unknown_action(name: str, request: Request) -> Response:
        _plain(name, request.method)
        raise InvalidArgumentError(f"{request.method} needs an action, e.g. {name}:append")

    return router
