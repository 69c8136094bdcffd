"""The board: a few bytes of memory shared by a node's supervisor and its workers, where each
says how it stands without a message or a lock.

The supervisor maps it before it starts the first worker, so every worker (and every worker
started again later) shares the same pages. Each field has one writer: a worker's state and
readiness are written by that worker while it lives and by the supervisor once it has died;
a container's epoch and status by the worker that owns it. Readers take what is there: a
field is an aligned machine word, written whole.
"""

from __future__ import annotations

import mmap
import struct
from enum import IntEnum

from segmentstore.containers.status import ContainerStatus

_WORKER = struct.Struct("<iiii")  # pid, state, ready, starts
_CONTAINER = struct.Struct("<qi4x")  # epoch, status
_STATUSES = list(ContainerStatus)


class WorkerState(IntEnum):
    DOWN = 0  # not started yet, or dead and not started again yet
    STARTING = 1  # its process runs; not serving yet
    SERVING = 2  # its HTTP server accepts
    STOPPING = 3  # told to stop


class Board:
    def __init__(self, workers: int, containers: int) -> None:
        self.workers = workers
        self.containers = containers
        self._containers_at = workers * _WORKER.size
        size = self._containers_at + containers * _CONTAINER.size
        # Anonymous and shared: the same pages in the supervisor and in every process it forks.
        self._memory = mmap.mmap(-1, size, flags=mmap.MAP_SHARED)

    # -- workers ------------------------------------------------------------------------------

    def _worker(self, index: int) -> tuple[int, int, int, int]:
        pid, state, ready, starts = _WORKER.unpack_from(self._memory, index * _WORKER.size)
        return pid, state, ready, starts

    def set_worker(self, index: int, pid: int, state: WorkerState, *, ready: bool = False) -> None:
        starts = self._worker(index)[3] + (state is WorkerState.STARTING)
        _WORKER.pack_into(self._memory, index * _WORKER.size, pid, state, int(ready), starts)

    def set_ready(self, index: int, ready: bool) -> None:
        pid, state, _, starts = self._worker(index)
        _WORKER.pack_into(self._memory, index * _WORKER.size, pid, state, int(ready), starts)

    def state(self, index: int) -> WorkerState:
        return WorkerState(self._worker(index)[1])

    def serving(self, index: int) -> bool:
        return self._worker(index)[1] == WorkerState.SERVING

    def ready(self, index: int) -> bool:
        _pid, state, ready, _ = self._worker(index)
        return state == WorkerState.SERVING and bool(ready)

    def pid(self, index: int) -> int:
        return self._worker(index)[0]

    def starts(self, index: int) -> int:
        """How many times worker ``index`` was started."""
        return self._worker(index)[3]

    # -- containers ---------------------------------------------------------------------------

    def set_container(self, container: int, epoch: int, status: ContainerStatus) -> None:
        at = self._containers_at + container * _CONTAINER.size
        _CONTAINER.pack_into(self._memory, at, epoch, _STATUSES.index(status))

    def container(self, container: int) -> tuple[int, ContainerStatus]:
        """(epoch, status) as its owner last wrote them."""
        at = self._containers_at + container * _CONTAINER.size
        epoch, status = _CONTAINER.unpack_from(self._memory, at)
        return epoch, _STATUSES[status]
