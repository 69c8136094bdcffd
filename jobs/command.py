"""The jobs of ``segmentstore spark JOB``: one session, progress on stderr, a summary back.

The command line (the composition root) parses the flags into data source options and prints
the summary rows this returns; each job's columns come with its rows.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from segmentstore.jobs.compact import compact_events
from segmentstore.jobs.export import export_events
from segmentstore.jobs.progress import Progress
from segmentstore.jobs.session import start_session
from segmentstore.jobs.stats import segment_stats

JOBS = ("stats", "export", "compact")


@dataclass
class JobSummary:
    rows: list[dict[str, Any]]
    columns: list[tuple[str, str, str]]  # (key, heading, format spec)


def run_job(
    job: str,
    options: Mapping[str, str],
    *,
    master: str,
    output: str | None = None,
    overwrite: bool = False,
    python: str | None = None,
    conf: Mapping[str, str] | None = None,
) -> JobSummary:
    """Run ``job`` on a new session over the data source ``options``; stops the session.

    ``python`` is the executors' Python and ``conf`` more Spark settings
    (:func:`segmentstore.jobs.session.start_session`)."""
    if job not in JOBS:
        raise ValueError(f"unknown job {job!r}; jobs: {JOBS}")
    begun = time.perf_counter()
    spark = start_session(master, f"segmentstore-{job}", conf, python=python)
    progress = Progress(spark)
    progress.say(
        f"Spark {spark.version} on {master}, started in {time.perf_counter() - begun:.1f} s"
    )
    try:
        if job == "stats":
            rows = segment_stats(spark, options, progress)
            return JobSummary(
                rows,
                [
                    ("segment", "segment", ""),
                    ("events", "events", "d"),
                    ("bytes", "bytes", "d"),
                    ("first_offset", "first offset", ""),
                    ("last_offset", "last offset", ""),
                    ("scan_stop", "scanned to", "d"),
                    ("lost_chunks", "lost chunks", "d"),
                    ("lost_bytes", "lost bytes", "d"),
                ],
            )
        assert output is not None, f"{job} needs an output location"
        run = export_events if job == "export" else compact_events
        summary = run(spark, options, output, progress, overwrite=overwrite)
        return JobSummary([summary], [(key, key, "") for key in summary])
    finally:
        spark.stop()
        progress.say(f"{job}: finished in {time.perf_counter() - begun:.1f} s")
