"""``segmentstore spark stats``: per segment, how many events and payload bytes the snapshot
holds, the offsets of its first and last event, and what data was lost (with
``fail_on_data_loss=false``: missing chunks and truncated ranges, as the driver planned them)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from segmentstore.jobs.progress import Progress
from segmentstore.jobs.scan import pinned_scan


def segment_stats(
    spark: SparkSession, options: Mapping[str, str], progress: Progress
) -> list[dict[str, Any]]:
    """One row per selected segment, in name order."""
    with progress.phase("plan (read manifests)"):
        plan, events = pinned_scan(spark, options)
    with progress.phase(f"scan {len(plan.segments)} segments, {len(plan.partitions)} partitions"):
        counted = {
            row["segment"]: row
            for row in events.groupBy("segment")
            .agg(
                F.count(F.lit(1)).alias("events"),
                F.sum(F.length("event")).alias("bytes"),
                F.min("offset").alias("first_offset"),
                F.max("offset").alias("last_offset"),
            )
            .collect()
        }
    rows = []
    for segment in plan.segments:
        found = counted.get(segment.name)
        lost = [r for r in plan.lost if r.segment == segment.name]
        rows.append(
            {
                "segment": segment.name,
                "events": found["events"] if found else 0,
                "bytes": found["bytes"] if found else 0,
                "first_offset": found["first_offset"] if found else None,
                "last_offset": found["last_offset"] if found else None,
                "scan_start": segment.start,
                "scan_stop": segment.stop,
                "storage_length": segment.storage_length,
                "lost_chunks": sum(1 for r in lost if r.chunk is not None),
                "lost_bytes": sum(r.stop - r.start for r in lost),
            }
        )
    return rows
