"""The ``segmentstore`` Python data source of Spark 4 (``pyspark.sql.datasource``).

Spark creates :class:`SegmentStoreDataSource` when a DataFrame is loaded: its options are
checked then (:mod:`segmentstore.jobs.options`), so a mistake fails ``load()``. Spark calls
:meth:`SegmentStoreDataSource.reader` and :meth:`SegmentStoreReader.partitions` once, on the
driver, when it plans the query: that is where the manifests are read (the snapshot) and the
scan is cut into partitions (:mod:`segmentstore.jobs.planner`). Each partition then travels
to an executor, which reads it with :func:`segmentstore.jobs.partition_reader.read_partition`
and never reads a manifest. Failures reach the driver as one line
(:mod:`segmentstore.jobs.failures`). Columns: :mod:`segmentstore.jobs.schema`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.types import StructType

from segmentstore.jobs.failures import reported, reported_rows
from segmentstore.jobs.options import ScanOptions, SourceOptions
from segmentstore.jobs.partition_reader import read_partition
from segmentstore.jobs.planner import ScanPartition, plan_scan
from segmentstore.jobs.schema import BYTES_DDL, EVENTS_DDL
from segmentstore.jobs.storage_cache import open_storage
from segmentstore.jobs.stream_reader import SegmentStoreStreamReader


class SegmentStoreDataSource(DataSource):
    """``spark.read.format("segmentstore").option("tier2", uri).option("segments", ...)``."""

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        with reported():
            self.parsed = SourceOptions.parse(options)

    @classmethod
    def name(cls) -> str:
        return "segmentstore"

    def schema(self) -> str:
        return BYTES_DDL if self.parsed.scan.mode == "bytes" else EVENTS_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        return SegmentStoreReader(self.parsed.scan)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """``spark.readStream.format("segmentstore")``: :mod:`segmentstore.jobs.stream_reader`."""
        return SegmentStoreStreamReader(self.parsed)


class SegmentStoreReader(DataSourceReader):
    def __init__(self, options: ScanOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        options = self.options
        with reported():
            storage = open_storage(options.tier2_uri, options.tier2_options)
            plan = plan_scan(options, storage)
        return [InputPartition(partition) for partition in plan.partitions]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        spec: Any = partition.value
        if not isinstance(spec, ScanPartition):
            return iter(())  # Spark's stand-in for a scan with no partitions
        options = self.options
        storage = open_storage(options.tier2_uri, options.tier2_options)
        rows = read_partition(
            storage,
            spec,
            fail_on_data_loss=options.fail_on_data_loss,
            verify_checksums=options.verify_checksums,
        )
        return reported_rows(rows)
