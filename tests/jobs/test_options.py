"""The data source options: defaults, forms, Kafka's names as aliases, and a clear error for
each mistake naming the option, the value and what is allowed."""

from __future__ import annotations

import pytest

from segmentstore.jobs.errors import ScanOptionsError
from segmentstore.jobs.options import (
    EARLIEST,
    LATEST,
    OPTIONS,
    Bound,
    ScanOptions,
    SegmentSelection,
    SourceOptions,
)

BASE = {"tier2": "file:///t2", "segments": "a/b"}


def test_defaults_read_every_event_from_earliest_to_latest_and_fail_on_loss() -> None:
    options = ScanOptions.parse(BASE)
    assert options.mode == "events"
    assert options.starting == Bound(EARLIEST) and options.ending == Bound(LATEST)
    assert options.fail_on_data_loss is True
    assert options.tier2_options == {}
    assert options.min_partitions == 1


def test_backend_options_and_offsets() -> None:
    options = ScanOptions.parse(
        {
            "tier2": "s3://bucket/p",
            "tier2.endpoint_url": "http://127.0.0.1:9000",
            "tier2.access_key": "k",
            "segments": "a,b",
            "mode": "bytes",
            "starting_offsets": '{"a": 10, "b": -2}',
            "ending_offsets": '{"a": -1}',
            "fail_on_data_loss": "false",
            "min_partitions": "8",
        }
    )
    assert options.tier2_options == {"endpoint_url": "http://127.0.0.1:9000", "access_key": "k"}
    assert options.starting == Bound(EARLIEST, offsets={"a": 10, "b": EARLIEST})
    assert options.ending == Bound(LATEST, offsets={"a": LATEST})
    assert (options.mode, options.fail_on_data_loss, options.min_partitions) == ("bytes", False, 8)
    assert "access_key" not in repr(options) and "'k'" not in repr(options)


def test_words_and_timestamps() -> None:
    latest = ScanOptions.parse({**BASE, "starting_offsets": "LATEST"})
    assert latest.starting == Bound(LATEST)
    stamp = ScanOptions.parse({**BASE, "starting_timestamp": "1700000000000"})
    assert stamp.starting == Bound(EARLIEST, timestamp=1700000000000)
    per_segment = ScanOptions.parse(
        {**BASE, "ending_offsets_by_timestamp": '{"a/b": 1700000000000}'}
    )
    assert per_segment.ending == Bound(LATEST, timestamps={"a/b": 1700000000000})


def test_kafka_names_are_aliases_in_any_case() -> None:
    kafka = SourceOptions.parse(
        {
            **BASE,
            "startingOffsets": '{"a/b": 16}',
            "endingoffsets": "latest",
            "FAILONDATALOSS": "false",
            "minPartitions": "3",
            "maxBytesPerTrigger": "4096",
        }
    )
    ours = SourceOptions.parse(
        {
            **BASE,
            "starting_offsets": '{"a/b": 16}',
            "ending_offsets": "latest",
            "fail_on_data_loss": "false",
            "min_partitions": "3",
            "max_bytes_per_trigger": "4096",
        }
    )
    assert kafka == ours
    assert {o.kafka for o in OPTIONS if o.kafka} >= {
        "startingOffsets",
        "endingOffsets",
        "startingTimestamp",
        "startingOffsetsByTimestamp",
        "endingTimestamp",
        "endingOffsetsByTimestamp",
        "failOnDataLoss",
        "minPartitions",
    }


def test_a_stream_refuses_what_only_a_batch_reads() -> None:
    assert SourceOptions.parse(BASE).stream_problem() is None
    problem = SourceOptions.parse({**BASE, "endingOffsets": "latest"}).stream_problem()
    assert problem is not None and "ending_offsets" in str(problem)
    problem = SourceOptions.parse({**BASE, "mode": "bytes"}).stream_problem()
    assert problem is not None and "mode" in str(problem)


def test_segments_are_names_and_prefixes() -> None:
    assert SegmentSelection.parse("a/0, a/1,scope/*,*") == SegmentSelection(
        ("a/0", "a/1"), ("scope/", "")
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"segments": "a"}, r"option tier2: None is required; allowed: a Tier 2 URI"),
        ({"tier2": "file:///t"}, "option segments: None is required"),
        ({"tier2": "file:///t", "segments": ","}, "option segments: ',' names no segment"),
        ({"tier2": "file:///t", "segments": "a*b"}, "'\\*' may only end a prefix"),
        ({**BASE, "mode": "rows"}, r"option mode: 'rows' is not a mode; allowed: events, bytes"),
        (
            {**BASE, "starting_offsets": "first"},
            r"option starting_offsets \(startingOffsets\): 'first' is not allowed; allowed: "
            r"earliest, latest, or a JSON object",
        ),
        (
            {**BASE, "ending_offsets": "earliest"},
            r"option ending_offsets \(endingOffsets\): 'earliest' is not allowed; allowed: "
            r"latest, or a JSON",
        ),
        ({**BASE, "ending_offsets": '{"a": -3}'}, r"gives 'a' the offset -3, not an integer"),
        ({**BASE, "ending_offsets": '{"a": true}'}, "not an integer"),
        ({**BASE, "startingOffsets": '{"t": {"0": 5}}'}, "nests an object under 't'"),
        (
            {**BASE, "fail_on_data_loss": "yes"},
            r"option fail_on_data_loss \(failOnDataLoss\): 'yes' is not a boolean; allowed: "
            "true, false",
        ),
        ({**BASE, "minPartitions": "0"}, r"'0' is not a positive integer; allowed: an integer"),
        ({**BASE, "maxBytesPerTrigger": "1k"}, r"max_bytes_per_trigger \(maxBytesPerTrigger\)"),
        ({**BASE, "startingTimestamp": "yesterday"}, "'yesterday' is not a timestamp"),
        (
            {**BASE, "starting_offsets": "earliest", "startingTimestamp": "5"},
            "starting_timestamp .*cannot be given with starting_offsets",
        ),
        (
            {**BASE, "startingOffsets": "earliest", "starting_offsets": "latest"},
            "'latest' contradicts 'earliest', given under its other name",
        ),
        ({**BASE, "segment": "a"}, "unknown option 'segment'; known: tier2, segments"),
    ],
)
def test_mistakes_are_named(options: dict[str, str], message: str) -> None:
    with pytest.raises(ScanOptionsError, match=message):
        ScanOptions.parse(options)
