"""The container supervisor: recovers failed containers by themselves, so no fault needs a
person unless recovery can never get past it.

Every ``recovery_retry_min_ms`` it looks at each container. A running one resets its backoff.
One that is ``offline`` or ``read_only`` for a failure that is not permanent
(``failures.is_permanent``) is recovered in place (the same path as
``POST /v1/containers/{id}:restart``), first ``recovery_retry_min_ms`` after it was seen
failed, then after a wait that doubles per failed try up to ``recovery_retry_max_ms``. One
that failed because Tier 1 is out of space stays ``read_only`` (serving reads) until Tier 1
has ``recovery_room_bytes`` free again: recovering it earlier would only fail the same way and
stop its reads (a restart asked for by a person is refused then too, :func:`stays_read_only`).
Its Durable Log meanwhile truncates Tier 1 behind what the Storage Writer moves to Tier 2,
which is where that room comes from once Tier 2 takes data again. A permanent failure is
logged once and left for a person; the other containers carry on either way. A try that
raises (a bug on the recovery path) is logged and counts as a try that failed: the supervisor
itself never stops before the store does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence

from segmentstore.containers.container import SegmentContainer
from segmentstore.containers.failures import is_out_of_space, is_permanent
from segmentstore.containers.status import ContainerStatus
from segmentstore.contracts.errors import InsufficientStorageError
from segmentstore.settings import StoreSettings

log = logging.getLogger(__name__)

_FAILED = (ContainerStatus.OFFLINE, ContainerStatus.READ_ONLY)


class ContainerSupervisor:
    def __init__(
        self,
        containers: Sequence[SegmentContainer],
        restart: Callable[[int], Awaitable[SegmentContainer]],
        settings: StoreSettings,
        owned: Callable[[int], bool] = lambda _: True,
    ) -> None:
        self._containers = containers
        # In a cluster, a container this node does not hold is another node's to recover.
        self._owned = owned
        self._restart = restart
        self._min_s = settings.recovery_retry_min_ms / 1000
        self._max_s = settings.recovery_retry_max_ms / 1000  # validated: not below min
        self._room_bytes = settings.recovery_room_bytes
        self._delay_s: dict[int, float] = {}
        self._next_at: dict[int, float] = {}
        self._reported: set[int] = set()
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="supervisor")
        self._task.add_done_callback(self._on_done)

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            await asyncio.wait([self._task])

    def _on_done(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.error("container supervisor stopped: %r", task.exception())

    async def _run(self) -> None:
        while not self._stop.is_set():
            for container in self._containers:
                if self._stop.is_set():
                    return
                await self._look_at(container)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), self._min_s)

    async def _look_at(self, container: SegmentContainer) -> None:
        cid = container.id
        if container.status is ContainerStatus.RUNNING or not self._owned(cid):
            self._delay_s.pop(cid, None)
            self._next_at.pop(cid, None)
            self._reported.discard(cid)
            return
        if container.status not in _FAILED:
            return  # stopped or recovering: someone else is at it
        error = container.failure_error
        if is_permanent(error):
            if cid not in self._reported:
                self._reported.add(cid)
                log.error(
                    "container %d stays offline, recovery cannot get past this: %s",
                    cid, container.failure,
                )  # fmt: skip
            return
        now = time.monotonic()
        if cid not in self._next_at:
            # First seen failed: give it one interval (a restart under way, a test, a person)
            self._next_at[cid] = now + self._min_s
        if now < self._next_at[cid]:
            return
        if is_out_of_space(error) and not container.tier1_has_room(self._room_bytes):
            # A truncation that found no room for its own record is tried again meanwhile.
            container.truncate_behind_tier2()
            return  # looked at again next round: asking costs one statvfs
        log.warning(
            "container %d is %s (%s): recovering it", cid, container.status.value, container.failure
        )
        try:
            await self._restart(cid)
        except Exception:  # a bug on the way: this try failed, the next one may not
            log.exception("recovering container %d raised", cid)
        container.auto_recoveries += 1
        if _running(container):  # (a function: mypy would keep the status narrowed above)
            log.info("container %d recovered by itself (epoch %d)", cid, container.epoch)
            return
        delay = min(self._delay_s.get(cid, self._min_s / 2) * 2, self._max_s)
        self._delay_s[cid] = delay
        self._next_at[cid] = time.monotonic() + delay
        log.warning("container %d did not recover (%s); next try in %.1f s",
                    cid, container.failure, delay)  # fmt: skip


def stays_read_only(
    container: SegmentContainer, room_bytes: int
) -> InsufficientStorageError | None:
    """Why a read-only ``container`` (Tier 1 full) must not be recovered now: Tier 1 has less
    than ``room_bytes`` free, so its recovery would fail and leave it serving no reads."""
    if container.status is not ContainerStatus.READ_ONLY or container.tier1_has_room(room_bytes):
        return None
    return InsufficientStorageError(
        f"container {container.id} stays read-only: Tier 1 has less than {room_bytes} bytes"
        " free, too little to recover it; it recovers by itself once Tier 1 is truncated"
        " behind Tier 2 (Tier 2 must take data again) or given room"
    )


def _running(container: SegmentContainer) -> bool:
    return container.status is ContainerStatus.RUNNING
