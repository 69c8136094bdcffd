"""A lock the suite's processes (pytest-xdist's workers) share through a file, for set-up that
two of them must not do at once on one machine: installing a Debian package (dpkg takes one at
a time) or Helm into the clone's ``.tools``."""

from __future__ import annotations

import contextlib
import fcntl
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def one_at_a_time(name: str) -> Iterator[None]:
    """Held by one process of the machine at a time, released when the block ends (or the
    process dies: the kernel drops an flock with its file)."""
    path = Path(tempfile.gettempdir()) / f"segmentstore-tests-{name}.lock"
    with open(path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield
