"""What a worker writes on the board (:mod:`.board`) while it serves: whether it is ready, and
the epoch and status of each container it holds, at once when a container's status changes
(so that a sibling asked right after a request that changed it, a restart, answers as the
change left it) and a few times a second besides; the other workers read them for
``GET /v1/cluster``, node-wide readiness and the status of the whole node."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable

from segmentstore.store import SegmentStore
from segmentstore.workers.board import WorkerState
from segmentstore.workers.place import WorkerPlace

log = logging.getLogger(__name__)

PUBLISH_EVERY_S = 0.1


class BoardPublisher:
    def __init__(self, store: SegmentStore, place: WorkerPlace, ready: Callable[[], bool]) -> None:
        self._store = store
        self._place = place
        self._ready = ready
        self._task: asyncio.Task[None] | None = None

    def serving(self) -> None:
        """This worker's HTTP server accepts: say so, and keep the board current from now on."""
        place = self._place
        place.board.set_worker(place.index, os.getpid(), WorkerState.SERVING)
        for container in self._store.containers:
            container.on_status = self.publish
        self.publish()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="board")
        self._task.add_done_callback(_log_failure)

    def stopping(self) -> None:
        place = self._place
        if self._task is not None:
            self._task.cancel()
            self._task = None
        for container in self._store.containers:
            container.on_status = None
        place.board.set_worker(place.index, os.getpid(), WorkerState.STOPPING)

    def publish(self) -> None:
        place = self._place
        place.board.set_ready(place.index, self._ready())
        for container in self._store.containers:
            if container.id in self._store.owned:
                place.board.set_container(container.id, container.epoch, container.status)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(PUBLISH_EVERY_S)
            self.publish()


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("the board is no longer kept current", exc_info=task.exception())


def starting(place: WorkerPlace) -> None:
    """Said by a worker as soon as it runs."""
    place.board.set_worker(place.index, os.getpid(), WorkerState.STARTING)
