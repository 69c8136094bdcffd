"""Turning a read's starting and ending options into offsets of one segment's snapshot.

* ``earliest`` is the start offset, ``latest`` the storage length; a timestamp is the offset
  that ``:offsetAt`` gives for it (:meth:`SegmentBoundaries.at_time`).
* An offset below the start offset asks for truncated bytes: data loss (an error, or with
  ``fail_on_data_loss=false`` a warning and a start at the start offset).
* A start offset that is not an event boundary (a truncation cut an event) is data loss too:
  ``[start offset, next boundary)`` is the rest of the cut event. With
  ``fail_on_data_loss=false`` the read goes on at the next boundary Tier 2 proves; if Tier 2
  does not hold that boundary yet, there is nothing to read yet.
* Any other offset given in events mode must be an event boundary: one inside an event is an
  option error that names the event's end, never rounded silently.
* An ending offset past the storage length ends at the storage length (the snapshot).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from segmentstore.jobs.boundaries import SegmentBoundaries
from segmentstore.jobs.errors import DataLossError, ScanOptionsError
from segmentstore.jobs.options import EARLIEST, LATEST, Bound

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LostRange:
    """Bytes ``[start, stop)`` of ``segment`` that the read cannot return; ``chunk`` is the
    missing chunk, or None for truncated bytes (below the start offset, or the rest of an
    event that a truncation cut)."""

    segment: str
    start: int
    stop: int
    chunk: str | None


@dataclass(frozen=True)
class Wanted:
    """An offset a bound asks for, and whether the user gave it as a number (which must
    then be an event boundary) rather than as a word or a timestamp."""

    offset: int
    given: bool


def asks_latest(bound: Bound, name: str) -> bool:
    """Whether ``bound`` places segment ``name`` at ``latest``."""
    if name in bound.offsets:
        return bound.offsets[name] == LATEST
    return name not in bound.timestamps and bound.timestamp is None and bound.default == LATEST


def wanted(bound: Bound, boundaries: SegmentBoundaries) -> Wanted:
    manifest = boundaries.manifest
    name = manifest.name
    offset = bound.offsets.get(name)
    if offset is None:
        stamp = bound.timestamps.get(name, bound.timestamp)
        if stamp is not None:
            return Wanted(boundaries.at_time(stamp), False)
        offset = bound.default
    if offset == EARLIEST:
        return Wanted(manifest.start_offset, False)
    if offset == LATEST:
        return Wanted(manifest.storage_length, False)
    return Wanted(offset, True)


def starting_offset(
    bound: Bound,
    boundaries: SegmentBoundaries,
    *,
    events: bool,
    fail_on_data_loss: bool,
    lost: list[LostRange],
    check_given: bool = True,
) -> int | None:
    """Where a read of the segment starts; None: at an event boundary that Tier 2 does not
    hold yet (a stream waits for it, a batch reads nothing). ``check_given`` false: an offset
    given as a number is known to be a boundary (a stream's own offsets)."""
    manifest = boundaries.manifest
    name, start_offset = manifest.name, manifest.start_offset
    asked = wanted(bound, boundaries)
    offset = asked.offset
    if offset > manifest.storage_length:
        raise ScanOptionsError(
            f"segment {name!r}: starting offset {offset} is beyond its storage length "
            f"{manifest.storage_length} in Tier 2"
        )
    if offset < start_offset:
        truncated(name, offset, start_offset, fail_on_data_loss, lost, "the read")
        offset = start_offset
    if not events:
        return offset
    if offset == start_offset:
        return first_event(boundaries, fail_on_data_loss, lost)
    if asked.given and check_given:
        located = boundaries.locate(offset)
        if not located.is_boundary:
            raise ScanOptionsError(
                f"segment {name!r}: starting offset {offset} is {located.describe()}: a "
                "starting offset is where an event begins"
            )
    return offset


def ending_offset(
    bound: Bound, boundaries: SegmentBoundaries, *, events: bool, check_given: bool = True
) -> tuple[int, bool]:
    """Where a read of the segment ends, and whether that end is an event boundary (so the
    last event must end exactly there) rather than the storage length (where the last
    event may still be partly unflushed)."""
    manifest = boundaries.manifest
    asked = wanted(bound, boundaries)
    offset = asked.offset
    if offset >= manifest.storage_length:
        return manifest.storage_length, False
    if offset <= manifest.start_offset:
        return offset, False  # nothing to read
    if events and asked.given and check_given:
        located = boundaries.locate(offset)
        if not located.is_boundary:
            raise ScanOptionsError(
                f"segment {manifest.name!r}: ending offset {offset} is {located.describe()}: "
                "an ending offset is where an event ends (never rounded down)"
            )
    return offset, events


def first_event(
    boundaries: SegmentBoundaries,
    fail_on_data_loss: bool,
    lost: list[LostRange],
    *,
    quiet: bool = False,
) -> int | None:
    """The first event boundary at or after the segment's start offset; a truncation that
    cut an event makes the rest of it data loss (``quiet``: not logged here, for a stream
    that plans the range, and logs it, later)."""
    manifest = boundaries.manifest
    start_offset = manifest.start_offset
    located = boundaries.locate(start_offset)
    if located.is_boundary:
        return start_offset
    stop = located.boundary if located.boundary is not None else manifest.storage_length
    where = (
        f"bytes [{start_offset}, {located.boundary}) are the rest of it"
        if located.boundary is not None
        else f"the rest of it runs past the {manifest.storage_length} bytes Tier 2 holds"
    )
    reason = f"a truncation at offset {start_offset} cut the event there: {where}"
    if fail_on_data_loss:
        raise DataLossError(manifest.name, reason)
    if stop > start_offset:
        if not quiet:
            log.warning("segment %r: %s; skipping them", manifest.name, reason)
        lost.append(LostRange(manifest.name, start_offset, stop, None))
    return located.boundary


def truncated(
    name: str,
    offset: int,
    start_offset: int,
    fail_on_data_loss: bool,
    lost: list[LostRange],
    before: str,
    *,
    quiet: bool = False,
) -> None:
    """``[offset, start_offset)`` was asked for but truncated ``before`` it was read."""
    reason = f"bytes [{offset}, {start_offset}) were truncated before {before}"
    if fail_on_data_loss:
        raise DataLossError(name, reason)
    if not quiet:
        log.warning("segment %r: %s; going on at its start offset %d", name, reason, start_offset)
    lost.append(LostRange(name, offset, start_offset, None))
