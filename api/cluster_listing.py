"""The two listings that span every container, gathered from every node of a cluster.

``GET /v1/segments`` asks each node for the page of the names it holds (the same query) and
merges them: the same page, in code point order, as one node holding every container would
give. It answers ``503 container_unavailable`` while any container has no owner, since a page
without that container's names would be wrong, not just late.

``GET /v1/containers`` takes each container's entry from the node that holds it and adds its
``owner``; a container nobody holds, or whose owner does not answer, is ``offline`` with the
reason.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

import aiohttp
from pydantic import TypeAdapter
from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

from segmentstore.api.errors import error_response
from segmentstore.api.forwarding import PeerBusy
from segmentstore.api.routes.segments import DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT
from segmentstore.cluster.ownership import ContainerOwnership
from segmentstore.cluster.secret import OWNER_SIGNATURE
from segmentstore.contracts.errors import ContainerUnavailableError

if TYPE_CHECKING:
    from segmentstore.api.forwarding import ForwardingSession


class ClusterListing:
    def __init__(self, membership: ContainerOwnership, session: ForwardingSession) -> None:
        self.membership = membership
        self.session = session

    async def answer(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["path"] == "/v1/segments":
            response = await self._segments(scope)
        else:
            response = await self._containers(scope)
        await response(scope, receive, send)

    async def _gather(self, scope: Scope) -> dict[str, tuple[int, bytes] | None]:
        """Node id -> (status, body) of the same request sent to every node; None if the node
        did not answer, or did not prove it is a member."""
        nodes = self.membership.describe()["nodes"]
        query = scope["query_string"].decode("latin-1")
        auth = {
            k.decode("latin-1"): v.decode("latin-1")
            for k, v in scope["headers"]
            if k == b"authorization"
        }
        secret = self.membership.secret

        async def ask(node: str, url: str) -> tuple[int, bytes] | None:
            try:
                async with self.session.get(url, scope["path"], query, auth) as (reply, nonce):
                    proof = reply.headers.get(OWNER_SIGNATURE.decode())
                    if not secret.check_answer(node, nonce, reply.status, proof):
                        return None
                    return reply.status, await reply.read()
            except (aiohttp.ClientError, OSError, TimeoutError, PeerBusy):
                return None

        answers = await asyncio.gather(*(ask(node["id"], node["url"]) for node in nodes))
        return {node["id"]: answer for node, answer in zip(nodes, answers, strict=True)}

    async def _segments(self, scope: Scope) -> Response:
        described = self.membership.describe()
        unowned = [c["id"] for c in described["containers"] if c["owner"] is None]
        if unowned:
            return _unavailable(unowned[0], "no node holds it right now (it is moving)")
        answers = await self._gather(scope)
        names: list[str] = []
        more = False
        for node, answer in answers.items():
            if answer is None:
                owned = [c["id"] for c in described["containers"] if c["owner"] == node]
                return _unavailable(owned[0] if owned else 0, f"node {node} does not answer")
            status, body = answer
            if status != 200:
                return Response(body, status, media_type="application/json")
            page = json.loads(body)
            names += page["segments"]
            more = more or page["next"] is not None
        limit = _limit(scope)
        names.sort()
        more = more or len(names) > limit
        names = names[:limit]
        return JSONResponse({"segments": names, "next": names[-1] if more else None})

    async def _containers(self, scope: Scope) -> Response:
        described = self.membership.describe()
        answers = await self._gather(scope)
        views: dict[str, dict[int, dict[str, Any]]] = {}
        for node, answer in answers.items():
            if answer is not None and answer[0] == 200:
                listed = json.loads(answer[1])["containers"]
                views[node] = {c["id"]: c for c in listed}
            elif answer is not None:
                return Response(answer[1], answer[0], media_type="application/json")
        containers = []
        for entry in described["containers"]:
            cid, owner = entry["id"], entry["owner"]
            view = views.get(owner, {}).get(cid) if owner is not None else None
            if view is None:
                reason = (
                    "no node holds it right now (it is moving)"
                    if owner is None
                    else f"its owner {owner} does not answer"
                )
                view = _offline(cid, entry["epoch"] or 0, reason)
            containers.append({**view, "owner": owner})
        return JSONResponse({"containers": containers})


_INTEGER = TypeAdapter(int)  # the route's own reading of a query integer ("1.0" is 1)


def _limit(scope: Scope) -> int:
    values = parse_qs(scope["query_string"].decode("latin-1")).get("limit")
    # Every node took the value already, so it reads here as it did there (the last given).
    limit = _INTEGER.validate_python(values[-1]) if values else DEFAULT_LIST_LIMIT
    return min(limit, MAX_LIST_LIMIT)


def _offline(container: int, epoch: int, reason: str) -> dict[str, Any]:
    return {
        "id": container,
        "epoch": epoch,
        "status": "offline",
        "segments": 0,
        "tier1_bytes": 0,
        "tier2_lag_bytes": 0,
        "last_sequence": 0,
        "reason": reason,
        "tier2_error": None,
        "recoveries": 0,
        "takeovers": 0,
        "owner": None,
    }


def _unavailable(container: int, reason: str) -> Response:
    return error_response(ContainerUnavailableError(container, reason))
