"""A single node's containers owned by its workers: fixed shares (:mod:`.share`), and whether
each worker serves now read from the board (:mod:`.board`).

It answers routing as a cluster's membership does
(:class:`~segmentstore.cluster.ownership.ContainerOwnership`), each worker a member named
``NODE/wI`` at its own URL, so a request for another worker's container is passed on by the
cluster's own forwarding, signed with the node's secret, and ``GET /v1/cluster`` shows the
workers as the nodes a client sends each request to. A worker that is down (dead, or started
again and not serving yet) owns nothing meanwhile: its containers answer ``503`` with
``Retry-After``.
"""

from __future__ import annotations

from typing import Any

from segmentstore.cluster.secret import ClusterSecret
from segmentstore.containers.status import ContainerStatus
from segmentstore.contracts.members import worker_id
from segmentstore.store import SegmentStore
from segmentstore.workers.place import WorkerPlace
from segmentstore.workers.share import share_of, worker_of

_SERVING = (ContainerStatus.RUNNING, ContainerStatus.READ_ONLY)


class WorkerShare:
    def __init__(self, store: SegmentStore, place: WorkerPlace) -> None:
        self.node_id = place.id
        self.url = place.url
        self.secret = ClusterSecret(place.secret)
        self._store = store
        self._place = place
        self._count = store.settings.store.containers
        self._leaving = False

    @property
    def container_count(self) -> int:
        return self._count

    @property
    def leaving(self) -> bool:
        return self._leaving

    async def start(self) -> None:
        return None

    async def leave(self) -> None:
        self._leaving = True

    def serves(self, container: int) -> bool:
        return worker_of(container, self._place.count) == self._place.index

    def owner(self, container: int) -> tuple[str, str] | None:
        place = self._place
        index = worker_of(container, place.count)
        if index != place.index and not place.board.serving(index):
            return None
        return worker_id(place.node_id, index), place.urls[index]

    def ready(self) -> bool:
        """Every container of this worker's share serves reads (runs, or is read-only with
        Tier 1 full)."""
        return all(
            self._store.container(c).status in _SERVING for c in self._place.share(self._count)
        )

    def describe(self) -> dict[str, Any]:
        place = self._place
        live = [i for i in range(place.count) if i == place.index or place.board.serving(i)]
        containers = []
        for container in range(self._count):
            index = worker_of(container, place.count)
            owner, epoch = None, None
            if index in live:
                owner = worker_id(place.node_id, index)
                if index == place.index:
                    state = self._store.container(container)
                    status, number = state.status, state.epoch
                else:
                    number, status = place.board.container(container)
                epoch = number if status in _SERVING else None
            containers.append({"id": container, "owner": owner, "epoch": epoch})
        nodes = [
            {
                "id": worker_id(place.node_id, i),
                "url": place.urls[i],
                "containers": sorted(share_of(i, place.count, self._count)),
            }
            for i in live
        ]
        return {"node": self.node_id, "nodes": nodes, "containers": containers}
