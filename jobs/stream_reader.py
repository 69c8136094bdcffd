"""``spark.readStream.format("segmentstore")``: segments' events as they reach Tier 2.

The options are those of the batch source (:mod:`segmentstore.jobs.options`) but the ending
ones (a stream has no end) and ``mode`` (events only: a micro-batch ends at an event boundary),
plus ``max_bytes_per_trigger``, the most bytes a micro-batch reads, shared among the segments.
The starting options apply when a query starts without a checkpoint; a restarted query goes on
from its checkpoint. ``latest`` starts after the last event each segment has flushed.

Spark drives it on the driver: :meth:`SegmentStoreStreamReader.latestOffset` reads the selected
manifests (so segments created since, that match a prefix, join the stream) and decides where
the next micro-batch ends (:mod:`segmentstore.jobs.stream_offsets`); ``partitions`` plans that
range as a batch scan does, with each segment's ends known to be event boundaries; executors
read the partitions as in a batch scan. Spark writes each micro-batch's offsets to the
checkpoint before running it and its sink commits the batch, which is what makes a restart
neither repeat nor skip an event.

``Trigger.AvailableNow``: :meth:`~SegmentStoreStreamReader.prepareForTriggerAvailableNow`
records where each segment's flushed events end when the query starts; micro-batches (each
within ``max_bytes_per_trigger``) go up to there and no further, and the query stops.

Spark builds the stream reader only once the query runs, so the one option mistake that only a
stream can see (an ending option, or ``mode=bytes``) fails the query when it starts; every
other mistake fails ``load()``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    SupportsTriggerAvailableNow,
)

from segmentstore.jobs.boundaries import SegmentBoundaries
from segmentstore.jobs.failures import reported, reported_rows
from segmentstore.jobs.options import EARLIEST, Bound, ScanOptions, SegmentSelection, SourceOptions
from segmentstore.jobs.partition_reader import read_partition
from segmentstore.jobs.planner import ScanPartition, plan_scan
from segmentstore.jobs.positions import asks_latest, starting_offset
from segmentstore.jobs.selection import select_segments
from segmentstore.jobs.storage_cache import open_storage
from segmentstore.jobs.stream_offsets import (
    flushed_boundary,
    next_offsets,
    split_incarnations,
    stamp,
)
from segmentstore.tier2 import ChunkStorage, ManifestsSeen, SegmentManifest


class SegmentStoreStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions) -> None:
        # Spark runs this reader in a Python process of its own, and sends the driver the
        # traceback of its failures unless SPARK_HIDE_TRACEBACK is set there (the session's
        # spark.sql.execution.pyspark.udf.hideTraceback.enabled does not reach that process,
        # as of Spark 4.3). Set it, so that a failed query says the project's error in one
        # line, as batch reads do; reported() logs the traceback at debug level.
        os.environ.setdefault("SPARK_HIDE_TRACEBACK", "1")
        self.options = options
        self.scan = options.scan
        self._problem = options.stream_problem()
        self._warned: set[str] = set()
        # The manifests read so far: each micro-batch reads again only those that changed.
        self._seen: ManifestsSeen = {}
        self._caps: dict[str, int] | None = None  # Trigger.AvailableNow's targets

    def _storage(self) -> ChunkStorage:
        if self._problem is not None:
            raise self._problem
        return open_storage(self.scan.tier2_uri, self.scan.tier2_options)

    def _manifests(self) -> list[SegmentManifest]:
        return select_segments(
            self.scan, self._storage(), required=False, warned=self._warned, seen=self._seen
        )

    def initialOffset(self) -> dict[str, Any]:
        with reported():
            starting = self.scan.starting
            storage = self._storage()
            offsets = {name: offset for name, offset in starting.offsets.items() if offset >= 0}
            ids = {}
            for manifest in self._manifests():
                ids[manifest.name] = manifest.segment_id
                boundaries = SegmentBoundaries(storage, manifest)
                if asks_latest(starting, manifest.name):
                    found = flushed_boundary(boundaries)
                else:
                    found = starting_offset(
                        starting,
                        boundaries,
                        events=True,
                        fail_on_data_loss=self.scan.fail_on_data_loss,
                        lost=[],
                    )
                offsets[manifest.name] = manifest.start_offset if found is None else found
            return stamp(offsets, ids)

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.options.max_bytes_per_trigger
        return ReadAllAvailable() if limit is None else ReadMaxBytes(limit)

    def prepareForTriggerAvailableNow(self) -> None:
        with reported():
            storage = self._storage()
            caps = {}
            for manifest in self._manifests():
                found = flushed_boundary(SegmentBoundaries(storage, manifest))
                caps[manifest.name] = manifest.start_offset if found is None else found
            self._caps = caps

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        with reported():
            return next_offsets(
                start,
                self._manifests(),
                self._storage(),
                max_bytes=limit.max_bytes if isinstance(limit, ReadMaxBytes) else None,
                fail_on_data_loss=self.scan.fail_on_data_loss,
                caps=self._caps,
            )

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begins, begin_ids = split_incarnations(start)
        ends, end_ids = split_incarnations(end)
        # A segment created again since ``start`` is read from its start (next_offsets
        # decided so, or failed the query): its old offset means nothing to the new one.
        again = {n for n in ends if n in begin_ids and begin_ids[n] != end_ids.get(n)}
        names = sorted(n for n, stop in ends.items() if n in again or stop > begins.get(n, -1))
        if not names:
            return []
        scan = ScanOptions(
            tier2_uri=self.scan.tier2_uri,
            tier2_options=self.scan.tier2_options,
            segments=SegmentSelection(tuple(names), ()),
            starting=Bound(
                EARLIEST, offsets={n: begins[n] for n in names if n in begins and n not in again}
            ),
            ending=Bound(EARLIEST, offsets={n: ends[n] for n in names}),
            fail_on_data_loss=self.scan.fail_on_data_loss,
            min_partitions=self.scan.min_partitions,
            verify_checksums=self.scan.verify_checksums,
        )
        with reported():
            plan = plan_scan(
                scan, self._storage(), offsets_are_boundaries=True, segment_ids=end_ids
            )
        return [InputPartition(partition) for partition in plan.partitions]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        spec: Any = partition.value
        if not isinstance(spec, ScanPartition):
            return iter(())
        rows = read_partition(
            self._storage(),
            spec,
            fail_on_data_loss=self.scan.fail_on_data_loss,
            verify_checksums=self.scan.verify_checksums,
        )
        return reported_rows(rows)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to release: Tier 2 belongs to the store, which truncates it by its own
        retention rules, never because a query has read it."""
