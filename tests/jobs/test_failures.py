"""The project's error as one line, found in the text of the exceptions Spark raises."""

from __future__ import annotations

import pytest

from segmentstore.jobs.errors import DataLossError, ScanError
from segmentstore.jobs.failures import one_line, reported, reported_rows
from segmentstore.tier2 import InvalidTier2UriError

SPARK_TEXT = (
    "[PYTHON_DATA_SOURCE_ERROR] Failed to generate Python data source read partitions: "
    "segmentstore.jobs.errors.DataLossError: data loss in segment 'a/0': bytes [0, 9) were "
    "truncated before the read\n SQLSTATE: 38000\n\tat org.apache.spark.Something(X.scala:1)\n"
)


def test_the_project_error_is_found_in_spark_text() -> None:
    assert one_line(RuntimeError(SPARK_TEXT)) == (
        "DataLossError: data loss in segment 'a/0': bytes [0, 9) were truncated before the read"
    )
    assert one_line(RuntimeError("first\nsecond")) == "RuntimeError: first"


def test_reported_passes_the_projects_errors_and_names_the_rest() -> None:
    with pytest.raises(DataLossError), reported():
        raise DataLossError("a/0", "gone")
    with pytest.raises(InvalidTier2UriError), reported():
        raise InvalidTier2UriError("x://", "bad")
    with pytest.raises(ScanError, match=r"^KeyError: 'k'$") as wrapped, reported():
        raise KeyError("k")
    assert wrapped.value.__cause__ is None and wrapped.value.__suppress_context__

    def rows() -> object:
        yield 1
        raise ZeroDivisionError("no")

    with pytest.raises(ScanError, match="ZeroDivisionError: no"):
        list(reported_rows(iter(rows())))  # type: ignore[call-overload]
