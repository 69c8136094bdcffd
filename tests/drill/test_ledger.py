"""The drill's own checks can fail: a lost, torn, corrupt or duplicated record is found from
the segment's bytes and the writers' ledger alone."""

from __future__ import annotations

from segmentstore.drill.ledger import SegmentLedger, check
from segmentstore.drill.payload import parse, record
from segmentstore.drill.report import DrillReport, FaultRecord


def _segment() -> tuple[bytes, SegmentLedger]:
    ledger = SegmentLedger()
    data = b""
    for seq in range(1, 6):
        piece = record(7, seq, 100 + seq)
        ledger.acknowledged[(7, seq)] = (len(data), len(piece))
        data += piece
    return data, ledger


def test_a_whole_segment_passes_and_an_unacknowledged_whole_record_is_allowed() -> None:
    data, ledger = _segment()
    data += record(8, 1, 50)  # in flight when the drill ended: whole is fine
    verdict = check("s", ledger, parse(data), len(data))
    assert (verdict.checked, verdict.lost, verdict.torn_bytes, verdict.duplicated) == (5, 0, 0, 0)


def test_a_missing_acknowledged_record_is_lost() -> None:
    data, ledger = _segment()
    first = ledger.acknowledged[(7, 1)][1]
    rest = data[first:]  # as if the first append had vanished and the rest moved up
    verdict = check("s", ledger, parse(rest), len(rest))
    assert verdict.lost == 5  # none is at its acknowledged offset any more
    assert verdict.problems


def test_a_flipped_byte_or_a_cut_tail_is_torn() -> None:
    data, ledger = _segment()
    flipped = bytearray(data)
    flipped[300] ^= 1
    verdict = check("s", ledger, parse(bytes(flipped)), len(flipped))
    assert verdict.torn_bytes > 0 and verdict.lost > 0
    cut = data[:-10]
    verdict = check("s", ledger, parse(cut), len(cut))
    assert verdict.torn_bytes == len(record(7, 5, 105)) - 10
    assert verdict.lost == 1
    # A tail reader that has seen only part of the last record is not torn yet.
    assert parse(cut, final=False).torn_at is None


def test_a_record_landing_twice_is_duplicated_and_a_duplicate_answer_must_be_backed() -> None:
    data, ledger = _segment()
    again = data + record(7, 3, 103)
    assert check("s", ledger, parse(again), len(again)).duplicated == 1
    ledger.applied_elsewhere.add((9, 1))  # answered duplicate, so it must be there
    assert check("s", ledger, parse(data), len(data)).lost == 1


def test_the_report_fails_on_loss_or_a_slow_recovery() -> None:
    report = DrillReport(seed=1, max_recovery_s=5)
    report.faults.append(FaultRecord("kill", 1.0, 2.0))
    assert report.passed
    assert report.recovery() == {"p50": 2.0, "p99": 2.0, "max": 2.0}
    report.lost = 1
    assert not report.passed
    report.lost = 0
    report.faults.append(FaultRecord("kill", 9.0, 6.0))
    assert not report.passed
    report.faults[-1] = FaultRecord("kill", 9.0, None)
    assert not report.passed and report.to_json()["passed"] is False


def test_a_check_from_an_offset_looks_only_beyond_it() -> None:
    data, ledger = _segment()
    start = ledger.acknowledged[(7, 3)][0]
    verdict = check("s", ledger, parse(data[start:], base=start), len(data), start)
    assert (verdict.checked, verdict.lost, verdict.torn_bytes) == (3, 0, 0)
    assert verdict.ends == {"s": len(data)}
    # What lies beyond is still checked: a record missing there is lost, a flipped byte torn.
    ledger.acknowledged[(7, 9)] = (len(data), 50)
    flipped = bytearray(data[start:])
    flipped[-20] ^= 1
    verdict = check("s", ledger, parse(bytes(flipped), base=start), len(data), start)
    assert verdict.lost == 2 and verdict.torn_bytes == len(record(7, 5, 105))
    # A duplicate answer's record may lie before the start: it is looked for only from 0.
    ledger.applied_elsewhere.add((7, 1))
    del ledger.acknowledged[(7, 9)]
    assert check("s", ledger, parse(data[start:], base=start), len(data), start).lost == 0
