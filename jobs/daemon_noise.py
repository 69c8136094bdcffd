"""Keeping the Python worker daemon's tracebacks of cancelled tasks off a job's console.

When a task fails, Spark cancels the job's other running tasks and closes their sockets. A
Python worker that PySpark's daemon had just forked for one of them then reads an end of file
where its task should begin, and the daemon prints that worker's ``EOFError`` traceback to its
standard error, which the JVM copies to ours. It says nothing about the job: the failure that
matters reaches the driver as the action's exception, one line of the project's error. Whether
it appears at all is a race with the cancellation.

:func:`cancelled_worker_noise_filtered` sends this process's standard error (file descriptor 2,
which the JVM and its daemons inherit) through a pipe and drops exactly those tracebacks: ones
whose frames are all in ``pyspark/daemon.py`` or ``pyspark/serializers.py`` and that end in an
end of file or a closed connection. Every other line passes through unchanged, in order.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_TRACEBACK_HEAD = b"Traceback (most recent call last):"
_DAEMON_FRAMES = (b"pyspark/daemon.py", b"pyspark/serializers.py")
_CANCELLED = (b"EOFError", b"ConnectionResetError", b"BrokenPipeError")


def is_cancelled_worker_traceback(lines: list[bytes]) -> bool:
    """A whole traceback (head, frames, exception line) of a daemon worker whose task was
    cancelled under it."""
    frames = [line for line in lines if line.lstrip().startswith(b'File "')]
    exception = lines[-1].strip()
    return (
        bool(frames)
        and all(any(name in frame for name in _DAEMON_FRAMES) for frame in frames)
        and exception.split(b":", 1)[0] in _CANCELLED
    )


class _Filter:
    """Reads the pipe line by line; holds back a traceback until its exception line says
    whether it is noise."""

    def __init__(self, read_fd: int, out_fd: int, sentinel: bytes) -> None:
        self._read_fd = read_fd
        self._out_fd = out_fd
        self._sentinel = sentinel
        self.drained = threading.Event()
        self._held: list[bytes] = []

    def run(self) -> None:
        with os.fdopen(self._read_fd, "rb", buffering=0) as pipe:
            pending = b""
            while chunk := pipe.read(65536):
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    self._line(line + b"\n")
            self._release()
            if pending:
                self._write(pending)

    def _line(self, line: bytes) -> None:
        if line.rstrip(b"\n") == self._sentinel:
            self._release()
            self.drained.set()
            return
        if self._held:
            self._held.append(line)
            if not line.startswith((b" ", b"\t")):  # the exception line ends a traceback
                block, self._held = self._held, []
                if not is_cancelled_worker_traceback(block):
                    self._write(b"".join(block))
            return
        if line.rstrip(b"\n") == _TRACEBACK_HEAD:
            self._held = [line]
            return
        self._write(line)

    def _release(self) -> None:
        if self._held:
            self._write(b"".join(self._held))
            self._held = []

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._out_fd, view) :]


@contextmanager
def cancelled_worker_noise_filtered() -> Iterator[None]:
    """Filter standard error while the block runs (the JVM started inside it keeps writing to
    the pipe after; what it writes then is still filtered, by a daemon thread)."""
    sys.stderr.flush()
    original = os.dup(2)
    read_fd, write_fd = os.pipe()
    sentinel = f"segmentstore-stderr-drained-{os.getpid()}-{id(original)}".encode()
    stderr_filter = _Filter(read_fd, original, sentinel)
    threading.Thread(target=stderr_filter.run, name="stderr-filter", daemon=True).start()
    os.dup2(write_fd, 2)
    os.close(write_fd)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.write(2, sentinel + b"\n")
        # Everything written before the sentinel is out once the filter reaches it; later
        # output of ours goes straight to the console again.
        stderr_filter.drained.wait(timeout=5)
        os.dup2(original, 2)
