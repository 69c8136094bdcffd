"""A process and the processes it started (a node's supervisor and its workers), as ``/proc``
shows them: found, signalled, and their CPU counted, by PID."""

from __future__ import annotations

import contextlib
import os


def _stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command name (field 3 is the first)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def children_of(pid: int) -> list[int]:
    """The processes whose parent is ``pid``, now."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as children:
            return [int(child) for child in children.read().split()]
    except OSError:
        return []


def process_tree_cpu_s(pid: int) -> float:
    """CPU seconds (user and system) used so far by ``pid``, the children it has waited for,
    and its live descendants; NaN where there is no ``/proc``."""
    fields = _stat(pid)
    if fields is None:
        return float("nan")
    # utime, stime, and cutime, cstime: the children this process waited for
    ticks = sum(int(fields[i]) for i in (11, 12, 13, 14))
    total = ticks / os.sysconf("SC_CLK_TCK")
    for child in children_of(pid):
        below = process_tree_cpu_s(child)
        if below == below:  # not NaN: it has not ended meanwhile
            total += below
    return total


def descendants(pid: int) -> list[int]:
    """Every process below ``pid``, now (children first)."""
    found = []
    for child in children_of(pid):
        found += [child, *descendants(child)]
    return found


def signal_tree(pid: int, number: int) -> list[int]:
    """Send ``number`` to ``pid`` and every process below it (found first, so that none
    started or reparented meanwhile is missed for a SIGSTOP); the PIDs signalled."""
    pids = [pid, *descendants(pid)]
    for each in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(each, number)
    return pids


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    fields = _stat(pid)
    return fields is not None and fields[0] != "Z"
