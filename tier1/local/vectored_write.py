"""Writing a list of buffers to a file completely, whatever ``writev`` does."""

from __future__ import annotations

import errno
import os

from segmentstore.tier1.log import Buffer

# writev takes at most IOV_MAX buffers (1024 on Linux) per call.
IOV_MAX = 1024


def writev_all(fd: int, buffers: list[Buffer], nbytes: int) -> None:
    """Write every buffer, IOV_MAX at a time, resuming after partial writes.

    ``nbytes`` is their total size. ``buffers`` may be modified.
    """
    if len(buffers) <= IOV_MAX:
        written = os.writev(fd, buffers)
        if written == nbytes:
            return  # the usual case
    else:
        written = 0
    sizes = [b.nbytes if isinstance(b, memoryview) else len(b) for b in buffers]
    index, count = 0, len(buffers)
    while True:
        while index < count and written >= sizes[index]:
            written -= sizes[index]
            index += 1
        if index == count:
            return
        if written:
            buffers[index] = memoryview(buffers[index]).cast("B")[written:]
            sizes[index] -= written
        window = buffers[index : index + IOV_MAX]
        written = os.writev(fd, window)
        if written == 0 and any(sizes[index : index + IOV_MAX]):
            # A regular file never does this, but looping on it would spin forever.
            raise OSError(errno.EIO, "writev wrote nothing")
