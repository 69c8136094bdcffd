"""The wire shapes of docs/api.md as pydantic models, for request validation and for OpenAPI.

Request models are strict (no ``"5"`` for ``5``, no ``true`` for ``1``) and refuse unknown
fields, so a typo is a ``400`` rather than a silently ignored setting. Answers are built as
plain JSON by the routes; the answer models here only document them.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr

from segmentstore.containers.container import SegmentContainer
from segmentstore.containers.status import ContainerStatus
from segmentstore.contracts.errors import (
    ContainerUnavailableError,
    InvalidArgumentError,
    InvalidNameError,
    SegmentNotFoundError,
    SegmentStoreError,
)


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Retention(_Request):
    time_ms: StrictInt | None = None
    bytes: StrictInt | None = None


class CreateSegment(_Request):
    attributes: dict[str, StrictInt] = Field(default_factory=dict)
    retention: Retention | None = None


class Truncate(_Request):
    offset: StrictInt


class Merge(_Request):
    source: StrictStr


class AttributeUpdateIn(_Request):
    key: StrictStr
    value: StrictInt
    type: Literal[
        "replace", "replace_if_absent", "replace_if_greater", "replace_if_equals", "accumulate"
    ] = "replace"
    # For replace_if_equals: the value expected now; null (or absent) means "expected absent".
    compare: StrictInt | None = None


class UpdateAttributes(_Request):
    updates: list[AttributeUpdateIn]


# -- answers (documentation only) ---------------------------------------------------------


class Info(BaseModel):
    name: str
    container: int
    start_offset: int
    length: int
    storage_length: int
    sealed: bool
    created_ms: int
    last_modified_ms: int
    retention: dict[str, int]
    attributes: dict[str, int]


class Appended(BaseModel):
    offset: int | None = Field(description="where the bytes start; null for a duplicate")
    length: int = Field(description="the segment's length after the append")
    duplicate: bool | None = Field(None, description="present (true) only for a duplicate")


class Merged(BaseModel):
    offset: int = Field(description="where the source's bytes start in the target")
    length: int = Field(description="the target's length after them")


class EventsAppended(Appended):
    events: int | None = Field(None, description="how many events (absent for a duplicate)")


class Listing(BaseModel):
    segments: list[str]
    next: str | None = Field(description="pass as `after` for the next page; null at the end")


class Transaction(BaseModel):
    transaction: str


class Attributes(BaseModel):
    attributes: dict[str, int]


class OffsetAt(BaseModel):
    offset: int


class ContainerView(BaseModel):
    id: int
    epoch: int
    status: Literal["running", "recovering", "read_only", "offline"]
    segments: int
    tier1_bytes: int
    tier2_lag_bytes: int
    last_sequence: int
    reason: str | None = Field(description="why the container is not running, if it is not")
    tier2_error: str | None = Field(description="the Tier 2 failure being retried, if any")
    recoveries: int = Field(description="recoveries started by the store itself after a fault")
    takeovers: int = Field(
        description="times the node that holds it took it over from another node and recovered"
        " it (cluster mode; 0 on one node)"
    )
    owner: str | None = Field(description="the cluster node that holds it; null on one node")


class Containers(BaseModel):
    containers: list[ContainerView]


class ClusterNode(BaseModel):
    id: str
    url: str
    containers: list[int] = Field(description="the containers it holds")


class ContainerOwner(BaseModel):
    id: int
    owner: str | None = Field(description="the node that holds it; null while it moves")
    epoch: int | None = Field(
        description="its Tier 1 epoch under that owner; null while the owner still recovers it"
    )


class MissingNode(BaseModel):
    id: str
    url: str
    last_seen_ms: int = Field(description="when the answering node last saw it alive")


class ClusterMap(BaseModel):
    node: str | None = Field(description="the node that answered; null on a single node")
    leases_held: bool | None = Field(
        description="whether the answering node holds its own lease now (else it names only"
        " itself and what it serves); null on a single node"
    )
    nodes: list[ClusterNode]
    missing: list[MissingNode] = Field(
        description="nodes seen alive since the answering node started that no longer are"
        " (dead or cut off; a node that left on purpose is not missing)"
    )
    containers: list[ContainerOwner]


class ErrorDetail(BaseModel):
    model_config = ConfigDict(extra="allow")  # the error's fields sit beside code and message
    code: str
    message: str


class ErrorBody(BaseModel):
    error: ErrorDetail


# What nearly every route can answer: a bad name or argument, and a container that cannot
# serve right now.
BAD_REQUEST: tuple[type[SegmentStoreError], ...] = (InvalidNameError, InvalidArgumentError)
SEGMENT_ERRORS: tuple[type[SegmentStoreError], ...] = (
    *BAD_REQUEST,
    SegmentNotFoundError,
    ContainerUnavailableError,
)


def error_descriptions(*errors: type[SegmentStoreError]) -> dict[int, str]:
    """Status -> what it means for a route that can raise ``errors``: the codes of the
    errors answered with it, from their classes."""
    codes: dict[int, set[str]] = {}
    for error in errors:
        codes.setdefault(error.status, set()).add(error.code)
    return {
        status: f"{HTTPStatus(status).phrase}: {', '.join(sorted(found))}"
        for status, found in sorted(codes.items())
    }


def error_responses(*errors: type[SegmentStoreError]) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries for the errors a route can answer, each under its class's status.

    The ``default`` entry says every other error has the same shape, and keeps FastAPI from
    documenting its own ``422`` validation answer, which this API never gives (it is ``400``).
    """
    entries: dict[int | str, dict[str, Any]] = {
        status: {"model": ErrorBody, "description": description}
        for status, description in error_descriptions(*errors).items()
    }
    entries["default"] = {"model": ErrorBody, "description": "any error"}
    return entries


# -- containers ---------------------------------------------------------------------------

PUBLIC_STATUSES = ("running", "recovering", "read_only", "offline")


def public_status(container: SegmentContainer) -> str:
    """Running, recovering, read_only (Tier 1 out of space: reads served, appends 507 until it
    has room) or offline; a stopped container (between the two halves of a restart, or after
    the store closed) serves nothing, so it is offline."""
    if container.status is ContainerStatus.STOPPED:
        return "offline"
    return container.status.value


def container_json(container: SegmentContainer, takeovers: int = 0) -> dict[str, Any]:
    return {
        "id": container.id,
        "epoch": container.epoch,
        "status": public_status(container),
        "segments": container.segment_count,
        "active_segments": container.active_segment_count,
        "tier1_bytes": container.tier1_bytes,
        "tier2_lag_bytes": container.tier2_lag_bytes,
        "last_sequence": container.last_sequence,
        "reason": container.failure,
        "tier2_error": container.tier2_error,
        "recoveries": container.auto_recoveries,
        "takeovers": takeovers,
        "owner": None,  # a cluster node's listing names it (segmentstore.api.cluster_listing)
    }
