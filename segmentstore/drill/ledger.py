"""What the drill's writers were told, and the check of a segment's bytes against it.

An append answered ``200`` with an offset is *acknowledged*: its record must be at that offset,
whole, for good. One answered ``duplicate`` was applied by an earlier attempt whose answer was
lost: it must be in the segment exactly once, wherever it landed. One never answered (the
drill ended while it was being retried) is *in flight*: whole or absent. Nothing else may be
in a segment, and no byte may be torn.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from segmentstore.drill.payload import Parsed


@dataclass
class SegmentLedger:
    acknowledged: dict[tuple[int, int], tuple[int, int]] = field(default_factory=dict)
    applied_elsewhere: set[tuple[int, int]] = field(default_factory=set)  # answered duplicate
    in_flight: set[tuple[int, int]] = field(default_factory=set)
    last_seq: dict[int, int] = field(default_factory=dict)  # writer -> last resolved sequence


@dataclass
class Verdict:
    checked: int = 0  # acknowledged records found whole at their offsets
    lost: int = 0
    torn_bytes: int = 0
    duplicated: int = 0
    problems: list[str] = field(default_factory=list)
    ends: dict[str, int] = field(default_factory=dict)  # segment -> how far it was read
    # why the lost ones were lost -> how many: every acknowledged append that could not be
    # read back counts, whatever stopped it (an offline container, a short chunk, ...)
    lost_reasons: dict[str, int] = field(default_factory=dict)

    def add(self, other: Verdict) -> None:
        self.checked += other.checked
        self.lost += other.lost
        for reason, count in other.lost_reasons.items():
            self.lost_reasons[reason] = self.lost_reasons.get(reason, 0) + count
        self.torn_bytes += other.torn_bytes
        self.duplicated += other.duplicated
        self.problems.extend(other.problems[: max(0, 20 - len(self.problems))])
        self.ends.update(other.ends)

    def count_lost(self, reason: str, count: int = 1) -> None:
        self.lost += count
        self.lost_reasons[reason] = self.lost_reasons.get(reason, 0) + count


def check(
    name: str,
    ledger: SegmentLedger,
    parsed: Parsed,
    length: int,
    start: int = 0,
    unread: str | None = None,
) -> Verdict:
    """``parsed`` is the segment read from ``start`` (a record boundary) up to ``length``; the
    ledger is a snapshot taken before the read (everything in it was acknowledged before those
    bytes were read). From a ``start`` past 0 only what lies beyond it is checked: the
    acknowledged records there, and duplicates among the records read. ``unread``: why the
    read stopped at ``length`` before the segment's end (the reason the acknowledged records
    past it are lost)."""
    verdict = Verdict(ends={name: length})
    if parsed.torn_at is not None:
        verdict.torn_bytes = length - parsed.torn_at
        verdict.problems.append(f"{name}: torn at {parsed.torn_at}: {parsed.reason}")
    at: dict[tuple[int, int], list[int]] = {}
    for found in parsed.records:
        at.setdefault((found.writer, found.seq), []).append(found.offset)
    for key, offsets in at.items():
        if len(offsets) > 1:
            verdict.duplicated += len(offsets) - 1
            verdict.problems.append(f"{name}: record {key} is there {len(offsets)} times")
    for key, (offset, _size) in ledger.acknowledged.items():
        if offset < start:
            continue
        if offset in at.get(key, ()):
            verdict.checked += 1
        else:
            if offset < length:
                verdict.count_lost("not at its offset")
            else:
                verdict.count_lost(unread or "past the segment's end")
            verdict.problems.append(f"{name}: acknowledged record {key} missing at {offset}")
    for key in ledger.applied_elsewhere if start == 0 else ():  # it may lie before start
        if key not in at:
            verdict.count_lost("answered duplicate, absent")
            verdict.problems.append(f"{name}: record {key} answered duplicate but is absent")
    return verdict
