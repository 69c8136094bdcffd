"""What a process the supervisor forks does first: it dies with the supervisor, takes its own
signals, and lets go of what is not its own."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
from collections.abc import Iterable

_PR_SET_PDEATHSIG = 1


def become_child(
    supervisor: int, signals: Iterable[int], not_mine: Iterable[socket.socket]
) -> None:
    """Set up a freshly forked child of ``supervisor``: SIGKILLed by the kernel the moment the
    supervisor dies (no orphan keeps a Tier 1 log locked), in a process group of its own (a
    terminal's Ctrl-C reaches the supervisor alone, which stops the workers once, gracefully),
    ``signals`` unblocked and at their defaults again, and the sockets in ``not_mine``
    (another worker's) closed."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the supervisor's SIGTERM is all there is
        pass
    if os.getppid() != supervisor:  # the supervisor died before the line above
        os._exit(1)
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)
    for number in signals:
        signal.signal(number, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, signals)
    for sock in not_mine:
        sock.close()
