"""``BlockArena``: fixed-size blocks in anonymous ``mmap`` buffers, and a stack of free blocks.

Block ``b`` lives in buffer ``b // blocks_per_buffer`` at byte ``(b % blocks_per_buffer) *
block_bytes``. Buffers are mapped only when the free blocks run out, up to ``max_blocks`` in
all, so the arena's address space grows with its high-water mark, not with its bound. A buffer
whose every block is free again gives its pages back to the kernel (``MADV_DONTNEED``; the
mapping stays and refills on next use), so the process's memory follows what is cached now:
a node that evicted a burst of segments shrinks back. The free list
is an ``array('i')`` used as a stack (4 bytes per block); it is kept so that popping yields
ascending block ids, which makes the blocks of one allocation consecutive whenever they were
freed or mapped together. A *run* is a ``(first block, count)`` of consecutive blocks in one
buffer: one contiguous range of memory.
"""

from __future__ import annotations

import contextlib
import mmap
from array import array
from concurrent.futures import Future, ThreadPoolExecutor

Run = tuple[int, int]

# Buffers are populated (their pages faulted in) when mapped, in one go: otherwise the first
# write to each 4 KiB page of a new buffer traps into the kernel on the append path.
_MAP_FLAGS = mmap.MAP_PRIVATE | getattr(mmap, "MAP_POPULATE", 0)


class BlockArena:
    """Allocates and frees blocks; knows nothing of entries. Not thread-safe."""

    def __init__(self, max_blocks: int, block_bytes: int, buffer_bytes: int) -> None:
        if block_bytes <= 0 or buffer_bytes < block_bytes or buffer_bytes % block_bytes:
            raise ValueError(
                f"buffer_bytes ({buffer_bytes}) must be a positive multiple of "
                f"block_bytes ({block_bytes})"
            )
        if max_blocks >= 1 << 31:
            raise ValueError(f"at most 2**31 - 1 blocks, not {max_blocks}")
        self.max_blocks = max_blocks
        self.block_bytes = block_bytes
        self.blocks_per_buffer = buffer_bytes // block_bytes
        self.used_blocks = 0
        self._buffers: list[mmap.mmap] = []
        # One writable and one read-only view per buffer: slicing these costs no copy.
        self.writable: list[memoryview] = []
        self.readonly: list[memoryview] = []
        self._mapped_blocks = 0
        self._free = array("i")
        # Blocks in use per buffer, and whether each buffer's pages are resident.
        self._in_use = array("i")
        self._resident: list[bool] = []
        self.released_buffers = 0  # times a wholly free buffer gave its pages back
        # The next buffer, being mapped by the helper thread (created on first need).
        self._ahead: Future[mmap.mmap] | None = None
        self._ahead_blocks = 0
        self._mapper: ThreadPoolExecutor | None = None

    @property
    def mapped_bytes(self) -> int:
        """Bytes of buffers mapped so far, the one mapped ahead included (the arena's share of
        the process's memory)."""
        return (self._mapped_blocks + self._ahead_blocks) * self.block_bytes

    def allocate(self, count: int) -> list[Run]:
        """Take ``count`` free blocks (the caller checked the bound) as runs in ascending order."""
        free = self._free
        if len(free) < count:
            self._map_buffers(count - len(free))
        self.used_blocks += count
        if count == 1:
            block = free.pop()
            self._taken(block // self.blocks_per_buffer, 1)
            return [(block, 1)]
        taken = free[-count:]
        del free[-count:]
        low, high = min(taken), max(taken)
        per_buffer = self.blocks_per_buffer
        runs = []
        if high - low == count - 1:
            # Distinct ids spanning count - 1 are exactly low..high: cut at buffer edges only.
            while low <= high:
                end = min(high + 1, (low // per_buffer + 1) * per_buffer)
                runs.append((low, end - low))
                low = end
        else:
            ids = sorted(taken)
            first = previous = ids[0]
            for block in ids[1:]:
                if block != previous + 1 or block % per_buffer == 0:
                    runs.append((first, previous - first + 1))
                    first = block
                previous = block
            runs.append((first, previous - first + 1))
        for first, run in runs:
            self._taken(first // per_buffer, run)
        return runs

    def _taken(self, buffer: int, count: int) -> None:
        self._in_use[buffer] += count
        self._resident[buffer] = True

    def free(self, starts: array[int], ends: array[int]) -> None:
        """Return runs (first blocks, cumulative block counts) to the free stack.

        Pushed last block first, so the next allocation pops them in ascending order.
        """
        push = self._free.extend
        in_use = self._in_use
        for run in range(len(starts) - 1, -1, -1):
            first = starts[run]
            count = ends[run] - (ends[run - 1] if run else 0)
            push(range(first + count - 1, first - 1, -1))
            self.used_blocks -= count
            buffer = first // self.blocks_per_buffer
            in_use[buffer] -= count
            if not in_use[buffer]:
                self._release(buffer)

    def _release(self, buffer: int) -> None:
        """Give a wholly free buffer's pages back (its blocks stay on the free list)."""
        if self._resident[buffer]:
            self._resident[buffer] = False
            self._buffers[buffer].madvise(mmap.MADV_DONTNEED)
            self.released_buffers += 1

    def _map_buffers(self, blocks: int) -> None:
        """Map buffers for at least ``blocks`` more blocks and push them as one descending
        range, so that an allocation spanning several new buffers gets them in order."""
        first = self._mapped_blocks
        if first + blocks > self.max_blocks:
            raise AssertionError("BlockArena.allocate called past max_blocks")
        while self._mapped_blocks < first + blocks:
            count = min(self.blocks_per_buffer, self.max_blocks - self._mapped_blocks)
            buffer = self._take_ahead(count)
            if buffer is None:
                buffer = mmap.mmap(-1, count * self.block_bytes, flags=_MAP_FLAGS)
            self._buffers.append(buffer)
            self._in_use.append(0)
            self._resident.append(True)
            view = memoryview(buffer)
            self.writable.append(view)
            self.readonly.append(view.toreadonly())
            self._mapped_blocks += count
        self._free.extend(range(self._mapped_blocks - 1, first - 1, -1))
        self._map_ahead()

    def _map_ahead(self) -> None:
        count = min(self.blocks_per_buffer, self.max_blocks - self._mapped_blocks)
        if count <= 0:
            return
        if self._mapper is None:
            self._mapper = ThreadPoolExecutor(1, thread_name_prefix="cache-mapper")
        self._ahead = self._mapper.submit(mmap.mmap, -1, count * self.block_bytes, flags=_MAP_FLAGS)
        self._ahead_blocks = count

    def _take_ahead(self, count: int) -> mmap.mmap | None:
        """The buffer mapped ahead, if it has ``count`` blocks (waiting for it if need be: it
        is already partly done); None if there is none or it failed (then map it here)."""
        ahead, self._ahead = self._ahead, None
        blocks, self._ahead_blocks = self._ahead_blocks, 0
        if ahead is None:
            return None
        try:
            buffer = ahead.result()
        except OSError:
            return None
        if blocks == count:
            return buffer
        buffer.close()
        return None

    def close(self) -> None:
        """Unmap the buffers. A buffer that callers still hold views of stays mapped until
        the last of those views is gone (``mmap`` refuses to close under exported views)."""
        self._take_ahead(0)  # no buffer has 0 blocks: the one mapped ahead is closed
        if self._mapper is not None:
            self._mapper.shutdown()
            self._mapper = None
        for view in self.readonly + self.writable:
            view.release()
        for buffer in self._buffers:
            with contextlib.suppress(BufferError):
                buffer.close()
        self._buffers.clear()
        self.writable.clear()
        self.readonly.clear()
        self._free = array("i")
        self._in_use = array("i")
        self._resident.clear()
