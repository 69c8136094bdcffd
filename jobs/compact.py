"""``segmentstore spark compact``: key-based compaction of events, Kafka's log compaction as a
batch job.

An event's payload starts with its key: ``key length (u16, big-endian) | key | value``. Per
segment and key the last event (the highest offset) wins; if its value is empty it is a
tombstone, and the key is dropped. The output is Parquet, partitioned by segment, with columns
``key``, ``value`` (both binary) and ``offset`` (of the winning event). A payload shorter than
its key length says fails the job, naming the event.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import Column, Observation, SparkSession
from pyspark.sql import functions as F

from segmentstore.jobs.output import write_by_segment
from segmentstore.jobs.progress import Progress
from segmentstore.jobs.scan import read_events

KEY_LENGTH_BYTES = 2


def key_length(event: Column) -> Column:
    return F.conv(F.hex(F.substring(event, 1, KEY_LENGTH_BYTES)), 16, 10).cast("int")


def compact_events(
    spark: SparkSession,
    options: Mapping[str, str],
    output: str,
    progress: Progress,
    *,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Write the last value of every live key under ``output``; what was read and kept."""
    event = F.col("event")
    malformed = F.length(event) < KEY_LENGTH_BYTES + F.coalesce(key_length(event), F.lit(0))
    problem = F.concat(
        F.lit("the event at offset "),
        F.col("offset").cast("string"),
        F.lit(" of segment "),
        F.col("segment"),
        F.lit(" has no key: a compacted payload is key length (u16be) | key | value"),
    )
    read = Observation("read")
    keyed = (
        read_events(spark, options)
        .observe(read, F.count(F.lit(1)).alias("events"))
        .select(
            "segment",
            "offset",
            "event",
            F.when(malformed, F.raise_error(problem)).otherwise(key_length(event)).alias("n"),
        )
        .select(
            "segment",
            "offset",
            F.expr(f"substring(event, {KEY_LENGTH_BYTES + 1}, n)").alias("key"),
            F.expr(f"substring(event, {KEY_LENGTH_BYTES + 1} + n)").alias("value"),
        )
    )
    latest = keyed.groupBy("segment", "key").agg(
        F.max_by(F.struct("offset", "value"), "offset").alias("last")
    )
    kept = Observation("kept")
    live = (
        latest.observe(
            kept,
            F.count(F.lit(1)).alias("keys"),
            F.coalesce(F.sum(F.when(F.length("last.value") == 0, 1)), F.lit(0)).alias("tombstones"),
        )
        .where(F.length("last.value") > 0)
        .select(
            "segment",
            "key",
            F.col("last.value").alias("value"),
            F.col("last.offset").alias("offset"),
        )
    )
    with progress.phase(f"compact into {output}"):
        sorted_live = live.repartition("segment").sortWithinPartitions("segment", "offset")
        write_by_segment(sorted_live, output, overwrite=overwrite)
    counts = kept.get
    return {
        "output": output,
        "events": read.get["events"],
        "keys": counts["keys"],
        "tombstones": counts["tombstones"],
        "kept": counts["keys"] - counts["tombstones"],
    }
