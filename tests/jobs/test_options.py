"""The data source options: defaults, forms, and a clear error for each mistake."""

from __future__ import annotations

import pytest

from segmentstore.jobs.errors import ScanOptionsError
from segmentstore.jobs.options import EARLIEST, LATEST, ScanOptions, SegmentSelection


def test_defaults_read_every_event_from_earliest_to_latest_and_fail_on_loss() -> None:
    options = ScanOptions.parse({"tier2": "file:///t2", "segments": "a/b"})
    assert options.mode == "events"
    assert options.starting_offsets == options.ending_offsets == {}
    assert options.fail_on_data_loss is True
    assert options.tier2_options == {}


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
        }
    )
    assert options.tier2_options == {"endpoint_url": "http://127.0.0.1:9000", "access_key": "k"}
    assert options.starting_offsets == {"a": 10, "b": EARLIEST}
    assert options.ending_offsets == {"a": LATEST}
    assert (options.mode, options.fail_on_data_loss) == ("bytes", False)
    assert "access_key" not in repr(options) and "'k'" not in repr(options)


def test_segments_are_names_and_prefixes() -> None:
    assert SegmentSelection.parse("a/0, a/1,scope/*,*") == SegmentSelection(
        ("a/0", "a/1"), ("scope/", "")
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"segments": "a"}, "tier2"),
        ({"tier2": "file:///t"}, "segments"),
        ({"tier2": "file:///t", "segments": ","}, "names no segment"),
        ({"tier2": "file:///t", "segments": "a*b"}, "may only end"),
        ({"tier2": "file:///t", "segments": "a", "mode": "rows"}, "mode"),
        ({"tier2": "file:///t", "segments": "a", "starting_offsets": "first"}, "JSON"),
        ({"tier2": "file:///t", "segments": "a", "ending_offsets": '{"a": -3}'}, "integer"),
        ({"tier2": "file:///t", "segments": "a", "ending_offsets": '{"a": true}'}, "integer"),
        ({"tier2": "file:///t", "segments": "a", "fail_on_data_loss": "yes"}, "true or false"),
        ({"tier2": "file:///t", "segments": "a", "segment": "a"}, "unknown options"),
    ],
)
def test_mistakes_are_named(options: dict[str, str], message: str) -> None:
    with pytest.raises(ScanOptionsError, match=message):
        ScanOptions.parse(options)
