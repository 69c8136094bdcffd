"""What Tier 1 must keep: ranges per segment, released behind Tier 2, moved by merges."""

from __future__ import annotations

from segmentstore.logs.tier1_retention import Tier1Retention


def test_a_merged_source_keeps_its_offsets_after_a_partial_release() -> None:
    retention = Tier1Retention(coalesce_bytes=100)
    for i in range(5):  # source: five ranges of 100 bytes, sequences 10..14
        retention.appended(1, i * 100, (i + 1) * 100, 10 + i)
    retention.release(1, 200)  # its first 200 bytes reached Tier 2
    retention.merged(1, 2, target_offset=1000)  # source offset 0 is target offset 1000
    retention.release(2, 1400)  # target bytes below 1400 = source bytes below 400
    assert retention.needed_sequence() == 12  # source bytes 400..500 still needed (one range)
    retention.release(2, 1500)
    assert retention.needed_sequence() is None


def test_holds_keep_operations_until_applied() -> None:
    retention = Tier1Retention()
    retention.hold(7)
    retention.appended(1, 0, 10, 9)
    assert retention.needed_sequence() == 7
    retention.unhold(7)
    assert retention.needed_sequence() == 9
