"""A ``segmentstore`` DataFrame of events, and the driver's own view of the same snapshot."""

from __future__ import annotations

import json
from collections.abc import Mapping

from pyspark.sql import DataFrame, SparkSession

from segmentstore.jobs.options import ScanOptions
from segmentstore.jobs.planner import ScanPlan, plan_scan
from segmentstore.tier2 import open_chunk_storage


def read_events(spark: SparkSession, options: Mapping[str, str]) -> DataFrame:
    """The events the data source options select (``mode`` is forced to ``events``)."""
    return spark.read.format("segmentstore").options(**{**options, "mode": "events"}).load()


def pinned_scan(spark: SparkSession, options: Mapping[str, str]) -> tuple[ScanPlan, DataFrame]:
    """Plan the scan on the driver too, and pin the DataFrame to the planned ranges.

    The driver's plan tells what the scan covers of each segment and what data is lost (the
    data source's own planning runs in a Spark worker process, out of reach); pinning its
    starting and ending offsets makes the DataFrame read exactly those ranges, so that the
    two agree even if the segments grow in between.
    """
    scan = ScanOptions.parse({**options, "mode": "events"})
    storage = open_chunk_storage(scan.tier2_uri, options=scan.tier2_options)
    try:
        plan = plan_scan(scan, storage)
    finally:
        storage.close()
    pinned = dict(options)
    if plan.segments:  # else nothing matched, and the data source finds nothing either
        pinned |= {
            "segments": ",".join(s.name for s in plan.segments),
            "starting_offsets": json.dumps({s.name: s.start for s in plan.segments}),
            "ending_offsets": json.dumps({s.name: s.stop for s in plan.segments}),
        }
    return plan, read_events(spark, pinned)
