"""``segmentstore spark export``: events to Parquet, partitioned by segment.

The files hold ``offset``, ``event`` and ``chunk``; the segment is the partition directory
(``segment=<name>``, with ``/`` escaped as ``%2F`` as Spark does).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import Observation, SparkSession
from pyspark.sql import functions as F

from segmentstore.jobs.output import write_by_segment
from segmentstore.jobs.progress import Progress
from segmentstore.jobs.scan import read_events


def export_events(
    spark: SparkSession,
    options: Mapping[str, str],
    output: str,
    progress: Progress,
    *,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Write the selected events under ``output``; what was written."""
    written = Observation("export")
    events = read_events(spark, options).observe(
        written,
        F.count(F.lit(1)).alias("events"),
        F.coalesce(F.sum(F.length("event")), F.lit(0)).alias("bytes"),
    )
    with progress.phase(f"export to {output}"):
        write_by_segment(events, output, overwrite=overwrite)
    return {"output": output, **written.get}
