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

import gc

# Young objects are collected every 10,000 allocations (rather than 700), the middle generation
# every 20 young collections, the oldest every 1,000 of those (and only once it grew by a
# quarter, CPython's own rule).
THRESHOLDS = (10_000, 20, 1_000)


def tune_for_many_segments() -> None:
    """Set the collector's thresholds for a process holding many segments."""
    gc.set_threshold(*THRESHOLDS)
