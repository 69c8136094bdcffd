"""Errors of the Spark jobs over Tier 2.

ScanError
├── ScanOptionsError   an option of the data source (or a job flag) that names no valid scan
├── DataLossError      bytes the snapshot promises are gone: a missing chunk, truncated data,
│                      an unreadable manifest
├── BrokenFramingError bytes that are not the event framing where events must be
└── OutputExistsError  a job's output location exists and is not to be replaced

ExecutorPythonError    the executors' Python cannot run the data source (no pyarrow, no project)

Every message names the segment and, where there is one, the offset and the chunk, so that a
failed Spark job says what is wrong without a debugger. Tier 2's own errors (an unreachable
backend) pass through unchanged.
"""

from __future__ import annotations


class ScanError(Exception):
    """Root of the errors of a scan of Tier 2."""


class ScanOptionsError(ScanError, ValueError):
    pass


class DataLossError(ScanError):
    """``fail_on_data_loss=false`` turns this into a skipped, counted and logged range."""

    def __init__(self, segment: str, reason: str, chunk: str | None = None) -> None:
        where = f", chunk {chunk}" if chunk is not None else ""
        super().__init__(
            f"data loss in segment {segment!r}{where}: {reason} "
            "(option fail_on_data_loss=false skips it)"
        )
        self.segment = segment
        self.chunk = chunk


class BrokenFramingError(ScanError):
    def __init__(self, segment: str, offset: int, reason: str) -> None:
        super().__init__(
            f"the bytes at offset {offset} of segment {segment!r} are not an event boundary: "
            f"{reason}"
        )
        self.segment = segment
        self.offset = offset


class OutputExistsError(ScanError):
    def __init__(self, output: str) -> None:
        super().__init__(
            f"the output {output} already exists: write elsewhere, or replace it (the job's "
            "overwrite, --overwrite on the command line)"
        )
        self.output = output


class ExecutorPythonError(RuntimeError):
    """The Python that Spark's executors run lacks what the data source needs; the message
    names that Python, what it lacks and what to install."""
