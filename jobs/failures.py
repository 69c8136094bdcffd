"""How the data source's failures reach the user: one line each, the project's own error.

A failure inside the data source runs in a Python worker that Spark started (on the driver
for planning and streaming offsets, on an executor for reading), and Spark hands the driver
whatever that worker prints for it. :func:`reported` makes that the project's error in one
line: the scan's errors (:mod:`segmentstore.jobs.errors`) and Tier 2's pass unchanged, anything
else becomes a :class:`~segmentstore.jobs.errors.ScanError` naming it; the traceback goes to
the worker's log at debug level. (``register`` also asks Spark to send the last line of a
Python worker's error rather than its traceback:
``spark.sql.execution.pyspark.udf.hideTraceback.enabled``.)

:func:`one_line` finds that line again in the exception Spark raises on the driver, for the
command-line jobs.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TypeVar

from segmentstore.jobs.errors import ScanError
from segmentstore.tier2 import Tier2Error

log = logging.getLogger(__name__)

T = TypeVar("T")

_PROJECT_ERROR = re.compile(r"(segmentstore\.[\w.]+Error): (.+)")


@contextmanager
def reported() -> Iterator[None]:
    """Re-raise what fails inside as the project's one-line error."""
    try:
        yield
    except (ScanError, Tier2Error):
        log.debug("the segmentstore data source failed", exc_info=True)
        raise
    except Exception as error:
        log.debug("the segmentstore data source failed", exc_info=True)
        raise ScanError(f"{type(error).__name__}: {error}") from None


def reported_rows(rows: Iterator[T]) -> Iterator[T]:
    """``rows``, with :func:`reported` around each step."""
    with reported():
        yield from rows


def one_line(error: BaseException) -> str:
    """The project's error that ``error`` (maybe Spark's, wrapping it) carries, as
    ``ErrorName: message``; else the first line of ``error``."""
    text = str(error)
    found = _PROJECT_ERROR.search(text)
    if found is not None:
        name = found.group(1).rsplit(".", 1)[-1]
        return f"{name}: {found.group(2).strip().removesuffix(' SQLSTATE: 38000').strip()}"
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return f"{type(error).__name__}: {first}" if first else type(error).__name__
