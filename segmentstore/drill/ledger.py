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

    def add(self, other: Verdict) -> None:
        self.checked += other.checked
        self.lost += other.lost
        self.torn_bytes += other.torn_bytes
        self.duplicated += other.duplicated
        self.problems.extend(other.problems[: max(0, 20 - len(self.problems))])


def check(name: str, ledger: SegmentLedger, parsed: Parsed, length: int) -> Verdict:
    """``parsed`` is the segment read whole up to ``length``; the ledger is a snapshot taken
    before the read (everything in it was acknowledged before those bytes were read)."""
    verdict = Verdict()
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
        if offset in at.get(key, ()):
            verdict.checked += 1
        else:
            verdict.lost += 1
            verdict.problems.append(f"{name}: acknowledged record {key} missing at {offset}")
    for key in ledger.applied_elsewhere:
        if key not in at:
            verdict.lost += 1
            verdict.problems.append(f"{name}: record {key} answered duplicate but is absent")
    return verdict
