"""Who serves each container, as routing asks it: this process, another member, or nobody.

Two things answer it: a cluster's membership (:class:`~.membership.ClusterMembership`: leases
in JetStream, shares that move), and the workers of a single node
(:class:`segmentstore.workers.ownership.WorkerShare`: fixed shares). The HTTP layer speaks to
either through this interface alone, so forwarding, the listings gathered from every member,
``GET /v1/cluster`` and readiness are one machinery for both.
"""

from __future__ import annotations

from typing import Any, Protocol

from segmentstore.cluster.secret import ClusterSecret


class ContainerOwnership(Protocol):
    node_id: str  # this member's id: a node's, or a worker's (NODE/wI)
    url: str  # where the other members and clients reach it
    secret: ClusterSecret  # signs what members pass each other

    @property
    def container_count(self) -> int: ...

    @property
    def leaving(self) -> bool:
        """Stopping: every answer closes its connection."""
        ...

    def serves(self, container: int) -> bool:
        """Whether this member serves ``container`` now."""
        ...

    def owner(self, container: int) -> tuple[str, str] | None:
        """(member id, URL) of the member that serves ``container``; None if none does now."""
        ...

    def ready(self) -> bool:
        """Whether this member serves everything it holds."""
        ...

    def describe(self) -> dict[str, Any]:
        """``GET /v1/cluster``: ``{"node", "nodes": [{"id", "url", "containers"}],
        "containers": [{"id", "owner", "epoch"}]}``."""
        ...

    async def start(self) -> None: ...

    async def leave(self) -> None: ...
