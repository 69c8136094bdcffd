"""Which node holds each container, so that a request goes to its owner directly.

A cluster answers every request on every node, forwarding it to the owner when it must (one
hop more, the body passing twice). The clients skip that hop: they read the container map
(``GET /v1/cluster``), work out a segment's container the way the store does, and send its
requests to the owner's URL. The map is read again, at most once a second, when an answer
says it is stale: it carries ``Segment-Owner`` (another node forwarded it), or it is ``503``
(the container is moving), or the owner could not be reached (it may have died; until the
map is read again its containers go to the client's own URL, which forwards them).

A single node answers an empty map: every request then goes to the client's URL, as before.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from segmentstore.contracts.mapping import container_of

from .calls import Call
from .reply import Answer

OWNER = "segment-owner"
_REFRESH_MIN_S = 1.0


def _cluster(answer: Answer) -> dict[str, Any]:
    return dict(json.loads(answer.content))


CLUSTER_MAP: Call[dict[str, Any]] = Call("GET", "/v1/cluster", _cluster, idempotent=True)


class OwnerMap:
    def __init__(self) -> None:
        self._owners: list[str | None] = []  # container -> owner URL (None: not known)
        self._suspects: set[str] = set()  # owner URLs that did not answer since the last read
        self._stale = True
        self._read_at = -_REFRESH_MIN_S

    def due(self) -> bool:
        """Whether the map should be read now (stale, and not read in the last second)."""
        return self._stale and time.monotonic() - self._read_at >= _REFRESH_MIN_S

    def update(self, cluster: Mapping[str, Any]) -> None:
        urls = {node["id"]: node["url"].rstrip("/") for node in cluster["nodes"]}
        owners = sorted(cluster["containers"], key=lambda c: c["id"])
        self._owners = [urls.get(c["owner"]) if c["owner"] else None for c in owners]
        self._suspects.clear()
        self._stale = False
        self._read_at = time.monotonic()

    def read(self, answer: Answer) -> None:
        """Take the answer to :data:`CLUSTER_MAP`; a server without the route has no cluster."""
        if answer.status_code == 404:
            self.update({"nodes": [], "containers": []})
        elif answer.status_code == 200:
            self.update(_cluster(answer))
        else:
            self.read_failed()

    def read_failed(self) -> None:
        self._read_at = time.monotonic()

    def url_for(self, call: Call[Any]) -> str | None:
        """The owner's URL for ``call``; None for the client's own URL (no segment in the
        call, no cluster, an owner not known or not answering)."""
        owners = self._owners
        name = call.context.get("name")
        if not owners or name is None:
            return None
        url = owners[container_of(name, len(owners))]
        return None if url in self._suspects else url

    def unreachable(self, url: str | None) -> None:
        if url is not None:
            self._suspects.add(url)
            self._stale = True

    def observe(self, call: Call[Any], status: int, headers: Mapping[str, str]) -> None:
        """Learn from an answer: a forwarded one names the owner; a 503 may mean a move."""
        owner = headers.get(OWNER)
        if owner is not None:
            self._stale = True
            name = call.context.get("name")
            if name is not None and self._owners:
                self._owners[container_of(name, len(self._owners))] = owner.rstrip("/")
        elif status == 503:
            self._stale = True
