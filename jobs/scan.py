"""A ``segmentstore`` DataFrame of events, and the driver's own view of the same snapshot."""

from __future__ import annotations

import json
from collections.abc import Mapping

from pyspark.sql import DataFrame, SparkSession

from segmentstore.jobs.boundaries import SegmentBoundaries
from segmentstore.jobs.chunk_reads import MissingChunkError
from segmentstore.jobs.options import POSITION_OPTIONS, ScanOptions, canonical_name
from segmentstore.jobs.planner import ScanPlan, plan_scan
from segmentstore.jobs.selection import open_read_storage, select_segments
from segmentstore.jobs.stream_offsets import last_boundary


def read_events(spark: SparkSession, options: Mapping[str, str]) -> DataFrame:
    """The events the data source options select (``mode`` is forced to ``events``)."""
    return spark.read.format("segmentstore").options(**{**options, "mode": "events"}).load()


def pinned_scan(spark: SparkSession, options: Mapping[str, str]) -> tuple[ScanPlan, DataFrame]:
    """Plan the scan on the driver too, and pin the DataFrame to the planned ranges.

    The driver's plan tells what the scan covers of each segment and what data is lost (the
    data source's own planning runs in a Spark worker process, out of reach); pinning its
    starting and ending offsets (each segment's end at its last whole event) makes the
    DataFrame read exactly those ranges, so that the two agree even if the segments grow in
    between.
    """
    scan = ScanOptions.parse({**options, "mode": "events"})
    storage = open_read_storage(scan.tier2_uri, scan.tier2_options)
    try:
        manifests = select_segments(scan, storage)
        plan = plan_scan(scan, storage, manifests=manifests)
        ends = {}
        for manifest, planned in zip(manifests, plan.segments, strict=True):
            boundaries = SegmentBoundaries(storage, manifest)
            try:
                ends[planned.name] = last_boundary(boundaries, planned.start, planned.stop)
            except MissingChunkError:  # lost (fail_on_data_loss=false): the scan says so
                ends[planned.name] = planned.stop
    finally:
        storage.close()
    pinned = {k: v for k, v in options.items() if canonical_name(k) not in POSITION_OPTIONS}
    if plan.segments:  # else nothing matched, and the data source finds nothing either
        # Pinned to the incarnations planned too: a segment deleted and created again before
        # Spark plans its own read is data loss, never read from these offsets.
        ids = {m.name: m.segment_id for m in manifests}
        pinned |= {
            "segments": ",".join(s.name for s in plan.segments),
            "starting_offsets": json.dumps(
                {s.name: {"segment_id": ids[s.name], "offset": s.start} for s in plan.segments}
            ),
            "ending_offsets": json.dumps(
                {name: {"segment_id": ids[name], "offset": end} for name, end in ends.items()}
            ),
        }
    else:
        pinned = dict(options)
    return plan, read_events(spark, pinned)
