"""The garbage collector of a process that holds many long-lived objects.

A node keeps tens of objects per active segment (its metadata, read index, cache entry), and
CPython's cyclic collector visits every surviving object again in its middle and oldest
generations: with the default thresholds, creating segments spent about a third of the event
loop's time in the collector, more as the heap grew. Nothing the store keeps per segment forms
a reference cycle (each segment's objects are freed by reference counting alone), so collecting
the older generations rarely costs nothing but the odd cycle of short-lived asyncio objects
that lives a little longer. ``segmentstore serve`` and the benchmarks tune the collector this
way; a program embedding the store with many segments may call the same.
"""

from __future__ import annotations

import ctypes
import gc
from collections.abc import Callable

# Young objects are collected every 10,000 allocations (rather than 700), the middle generation
# every 20 young collections, the oldest every 1,000 of those (and only once it grew by a
# quarter, CPython's own rule).
THRESHOLDS = (10_000, 20, 1_000)


def tune_for_many_segments() -> None:
    """Set the collector's thresholds for a process holding many segments."""
    gc.set_threshold(*THRESHOLDS)


def _malloc_trim() -> Callable[[int], int] | None:
    try:
        trim: Callable[[int], int] = ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc: its allocator keeps what it keeps
        return None
    return trim


_TRIM = _malloc_trim()


def give_back_freed_memory() -> None:
    """Return the C heap's free pages to the system. After many segments leave memory at once
    their objects are freed, but glibc keeps the pages they lived on, so the node's resident
    memory would stay at its peak."""
    if _TRIM is not None:
        _TRIM(0)
