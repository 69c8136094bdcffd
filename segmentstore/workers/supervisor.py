"""The supervisor of a node's workers: a small process that starts them, starts one again the
moment it dies, and stops them all.

* It runs no event loop and no thread: it waits for signals (``SIGCHLD``, ``SIGTERM``,
  ``SIGINT``) with :func:`signal.sigtimedwait`, so that forking a worker from it is safe.
* Before any worker starts, ``prepare`` runs in a child of its own (the data directory claimed
  once, Tier 2 checked, a lost Tier 1 refused or rebuilt): one process does what must be done
  once, the workers only find it done. If it fails, its one line says why and no worker
  starts.
* A worker that dies while the node serves (SIGKILL, a crash) is started again at once, the
  others serving on; its containers answer ``503`` with ``Retry-After`` meanwhile (routing
  reads :mod:`.board`). One that keeps dying young is started again with doubling waits, up
  to :data:`MAX_RESTART_WAIT_S`. A worker that fails before the node ever served stops the
  node: the failure is in its line on standard error, and the exit status is 1.
* ``SIGTERM`` or ``SIGINT`` stops every worker gracefully (each finishes or fails what is
  under way and closes its files within 30 s), waits for them, and then ends the way the
  signal says, as a single process does. A worker still there after
  :data:`STOP_TIMEOUT_S` is SIGKILLed.
* The supervisor's own death (even SIGKILL) takes the workers with it: each is SIGKILLed by
  the kernel (:mod:`.child`), so no orphan keeps a container's Tier 1 locked.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass

from segmentstore.workers.board import Board, WorkerState
from segmentstore.workers.child import become_child
from segmentstore.workers.place import WorkerPlace

log = logging.getLogger(__name__)

_SIGNALS = (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT)
STOP_TIMEOUT_S = 40.0  # a worker's graceful stop takes at most 30 s
MAX_RESTART_WAIT_S = 10.0
_YOUNG_S = 10.0  # a worker that dies younger than this is crash-looping: wait before the next


@dataclass
class _Worker:
    place: WorkerPlace
    pid: int = 0
    started_at: float = 0.0
    next_start_at: float = 0.0
    wait_s: float = 0.0  # before the next start, if this one dies young too
    served: bool = False


class Supervisor:
    def __init__(
        self,
        places: list[WorkerPlace],
        run_worker: Callable[[WorkerPlace], int],
        prepare: Callable[[], int] | None = None,
    ) -> None:
        self._workers = [_Worker(place) for place in places]
        self._run_worker = run_worker
        self._prepare = prepare
        self._board: Board = places[0].board
        self._sockets = [p.own_socket for p in places]
        self._pid = os.getpid()
        self._stopping: int | None = None  # the signal that stops the node

    def run(self) -> int:
        """Run the node until a signal stops it; the exit status."""
        signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
        if self._prepare is not None:
            prepared = self._wait_for(self._fork(self._prepare, []))
            if prepared != 0:
                return 1
        if self._stopping is None:
            for worker in self._workers:
                self._start(worker)
        while self._stopping is None:
            received = _wait_for_signal(self._timeout_s())
            if received is not None and received != signal.SIGCHLD:
                self._stopping = received
                break
            failed = self._reap()
            if failed is not None:
                log.error("worker %s could not start: stopping the node", failed.place.name)
                self._stop_all()
                return 1
            self._start_due()
        log.info("stopping %d workers (%s)", len(self._workers),
                 signal.Signals(self._stopping).name)  # fmt: skip
        if not self._stop_all():
            return 1
        # As a single process does (uvicorn raises the signal again once it has stopped).
        logging.shutdown()
        signal.signal(self._stopping, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGNALS)
        os.kill(os.getpid(), self._stopping)
        return 0

    # -- starting -----------------------------------------------------------------------------

    def _fork(self, work: Callable[[], int], not_mine: list[socket.socket]) -> int:
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid:
            return pid
        code = 1
        try:
            become_child(self._pid, _SIGNALS, not_mine)
            code = work()
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 1
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)

    def _start(self, worker: _Worker) -> None:
        place = worker.place
        not_mine = [s for s in self._sockets if s is not place.own_socket]
        worker.pid = self._fork(lambda: self._run_worker(place), not_mine)
        worker.started_at = time.monotonic()
        log.info("worker %s started (pid %d)", place.name, worker.pid)

    def _start_due(self) -> None:
        now = time.monotonic()
        for worker in self._workers:
            if worker.pid == 0 and worker.next_start_at <= now:
                self._start(worker)

    def _timeout_s(self) -> float:
        waiting = [w.next_start_at for w in self._workers if w.pid == 0]
        if not waiting:
            return 1.0
        return max(0.0, min(min(waiting) - time.monotonic(), 1.0))

    # -- workers that end ---------------------------------------------------------------------

    def _reap(self) -> _Worker | None:
        """Take note of every worker that ended; one that failed before the node ever
        served, if any."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return None
            if pid == 0:
                return None
            worker = next((w for w in self._workers if w.pid == pid), None)
            if worker is None:
                continue
            served = worker.served or self._board.state(worker.place.index) in (
                WorkerState.SERVING,
                WorkerState.STOPPING,
            )
            worker.served = served
            worker.pid = 0
            self._board.set_worker(worker.place.index, 0, WorkerState.DOWN)
            if not served and not any(w.served for w in self._workers):
                return worker
            self._schedule_restart(worker, _describe(status))

    def _schedule_restart(self, worker: _Worker, how: str) -> None:
        now = time.monotonic()
        lived_s = now - worker.started_at
        if lived_s >= _YOUNG_S:
            worker.wait_s = 0.0
        worker.next_start_at = now + worker.wait_s
        log.warning(
            "worker %s %s after %.1f s: starting it again%s",
            worker.place.name, how, lived_s,
            f" in {worker.wait_s:.1f} s" if worker.wait_s else "",
        )  # fmt: skip
        worker.wait_s = min(max(worker.wait_s * 2, 0.5), MAX_RESTART_WAIT_S)

    # -- stopping -----------------------------------------------------------------------------

    def _stop_all(self) -> bool:
        """SIGTERM every worker, wait for them (SIGKILL after :data:`STOP_TIMEOUT_S`); whether
        each stopped by itself."""
        live = {w.pid: w for w in self._workers if w.pid}
        for pid in live:
            _signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        clean = True
        while live:
            left = deadline - time.monotonic()
            if left <= 0:
                for pid, worker in live.items():
                    log.error("worker %s did not stop in %.0f s: killing it",
                              worker.place.name, STOP_TIMEOUT_S)  # fmt: skip
                    _signal(pid, signal.SIGKILL)
                clean = False
                deadline = time.monotonic() + STOP_TIMEOUT_S
            signal.sigtimedwait([signal.SIGCHLD], min(max(left, 0.01), 1.0))
            while live:
                try:
                    pid, status = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    live.clear()
                    break
                if pid == 0:
                    break
                stopped = live.pop(pid, None)
                if stopped is not None:
                    stopped.pid = 0
                    self._board.set_worker(stopped.place.index, 0, WorkerState.DOWN)
                    clean = clean and _stopped_cleanly(status)
        return clean

    def _wait_for(self, pid: int) -> int:
        """The exit status of child ``pid``, once it has ended (a stopping signal meanwhile
        is kept for the main loop)."""
        while True:
            received = signal.sigtimedwait(_SIGNALS, 1.0)
            if received is not None and received.si_signo != signal.SIGCHLD:
                self._stopping = received.si_signo
                _signal(pid, signal.SIGTERM)
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return os.waitstatus_to_exitcode(status)


def _signal(pid: int, number: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, number)


def _describe(status: int) -> str:
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        return f"was killed by {signal.Signals(-code).name}"
    return f"exited with status {code}"


def _stopped_cleanly(status: int) -> bool:
    code = os.waitstatus_to_exitcode(status)
    return code in (0, -signal.SIGTERM, -signal.SIGINT)


def _wait_for_signal(timeout_s: float) -> int | None:
    """The next of ``_SIGNALS`` within ``timeout_s``, or None. Woken from a SIGSTOP, Linux ends
    the wait early (EINTR), and CPython, finding the timeout passed, answers with a record it
    never filled in: a number that is no signal, taken here for the timeout it is."""
    received = signal.sigtimedwait(_SIGNALS, timeout_s)
    if received is None or received.si_signo not in _SIGNALS:
        return None
    return received.si_signo
