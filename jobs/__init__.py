"""Spark batch jobs that read segments straight from Tier 2, without the service.

``register(spark)`` (``from segmentstore import jobs; jobs.register(spark)``) adds the
``segmentstore`` data source to a session::

    spark.read.format("segmentstore")
        .option("tier2", "s3://bucket/prefix")
        .option("tier2.endpoint_url", "http://127.0.0.1:9000")
        .option("segments", "scope/stream/*")
        .load()

Options (:mod:`segmentstore.jobs.options`, checked when the DataFrame is loaded; Spark's Kafka
source's names are aliases): ``tier2`` and ``tier2.<backend option>``, ``segments`` (names, or
prefixes ending in ``*``), ``mode`` (``events`` or ``bytes``), the starting and ending offsets
or timestamps, ``fail_on_data_loss`` (default ``true``), ``min_partitions``. Columns
(:mod:`segmentstore.jobs.schema`): ``segment``, ``offset``, ``event`` (or ``data`` in bytes
mode), ``chunk``.

``spark.readStream.format("segmentstore")`` streams the same events as the Storage Writer
flushes them (:mod:`segmentstore.jobs.stream_reader`; ``max_bytes_per_trigger``,
``Trigger.AvailableNow``).

A scan is a consistent snapshot: each manifest is read once, when Spark plans the query, and
nothing past its storage length is returned; events are returned whole or not at all. The
jobs of ``segmentstore spark`` (``stats``, ``export``, ``compact``) are in
:mod:`segmentstore.jobs.stats`, :mod:`segmentstore.jobs.export` and
:mod:`segmentstore.jobs.compact`. This package is the only one that imports ``pyspark``.
May import: ``tier2``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["register"]


def register(spark: SparkSession) -> None:
    """Make ``spark.read.format("segmentstore")`` and ``spark.readStream.format(...)``
    available on ``spark``.

    It also sets what the data source needs of the session (:func:`segmentstore.jobs.session.
    prepare`): the executors run this driver's own Python unless ``spark.pyspark.python`` or
    ``PYSPARK_PYTHON`` names one, and a failure in a Python worker reaches the driver as its
    one-line error (``spark.sql.execution.pyspark.udf.hideTraceback.enabled``, unless set)."""
    from segmentstore.jobs.datasource import SegmentStoreDataSource
    from segmentstore.jobs.session import prepare

    prepare(spark)
    spark.dataSource.register(SegmentStoreDataSource)
