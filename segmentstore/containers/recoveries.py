"""Containers recovering in the background, so that a service answers while they do.

:class:`Recoveries` starts one task per container (each ``recovering`` from the moment it is
handed over, so nothing ever sees one that has not begun), reports each successful recovery's
duration to the store's :class:`~segmentstore.observations.Observations`, and lets the store
wait for all of them. A failed recovery leaves its container offline, as ``start`` does;
anything else escaping ``start`` is a bug, logged with its traceback rather than lost with the
task.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from segmentstore.containers.container import SegmentContainer
from segmentstore.containers.status import ContainerStatus
from segmentstore.observations import Observations

log = logging.getLogger(__name__)


class Recoveries:
    def __init__(self, observations: Observations) -> None:
        self._observations = observations
        self._tasks: list[asyncio.Task[None]] = []

    def begin(self, containers: Iterable[SegmentContainer]) -> None:
        """Mark every container recovering and recover each in a task of its own."""
        containers = list(containers)
        for container in containers:
            container.set_status(ContainerStatus.RECOVERING)
        self._tasks = [
            asyncio.create_task(self.recover(c), name=f"recover container {c.id}")
            for c in containers
        ]

    async def recover(self, container: SegmentContainer) -> None:
        """Start ``container`` (recovering it from Tier 1) and report how long it took."""
        try:
            await container.start()
        except Exception:
            log.exception("recovering container %d failed", container.id)
            raise
        if container.status is ContainerStatus.RUNNING:
            self._observations.recovered(container.id, container.recovery.seconds)

    async def wait(self) -> None:
        """Until every container has recovered (running) or failed to (offline)."""
        await asyncio.gather(*self._tasks)

    async def settle(self) -> None:
        """Like :meth:`wait`, but never raises: before the containers are stopped."""
        await asyncio.gather(*self._tasks, return_exceptions=True)
