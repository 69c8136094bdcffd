"""The board: what one process writes, a process forked from the same supervisor reads."""

from __future__ import annotations

import os

from segmentstore.containers.status import ContainerStatus
from segmentstore.workers.board import Board, WorkerState


def test_a_forked_process_writes_what_its_parent_reads() -> None:
    board = Board(workers=2, containers=4)
    assert [board.state(i) for i in range(2)] == [WorkerState.DOWN] * 2
    pid = os.fork()
    if pid == 0:  # the child: a worker saying it serves, and how its container stands
        try:
            board.set_worker(1, os.getpid(), WorkerState.STARTING)
            board.set_worker(1, os.getpid(), WorkerState.SERVING)
            board.set_ready(1, True)
            board.set_container(3, 7, ContainerStatus.READ_ONLY)
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert board.serving(1) and board.ready(1) and board.pid(1) == pid
    assert board.starts(1) == 1
    assert board.container(3) == (7, ContainerStatus.READ_ONLY)
    assert not board.serving(0) and not board.ready(0)
    assert board.container(0) == (0, ContainerStatus.STOPPED)


def test_a_worker_that_is_down_is_not_ready_whatever_it_said() -> None:
    board = Board(workers=1, containers=1)
    board.set_worker(0, 10, WorkerState.STARTING)
    board.set_worker(0, 10, WorkerState.SERVING)
    board.set_ready(0, True)
    assert board.ready(0)
    board.set_worker(0, 0, WorkerState.DOWN)  # what the supervisor writes once it died
    assert not board.ready(0) and not board.serving(0)
    board.set_worker(0, 11, WorkerState.STARTING)  # started again
    assert board.starts(0) == 2 and not board.ready(0)
