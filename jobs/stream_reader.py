"""``spark.readStream.format("segmentstore")``: segments' events as they reach Tier 2.

The options are those of the batch source (:mod:`segmentstore.jobs.options`) but
``ending_offsets`` (a stream has no end) and ``mode`` (events only: a micro-batch ends at an
event boundary), plus ``maxBytesPerTrigger``, the most bytes a micro-batch reads, shared among
the segments (like the Kafka source's ``maxOffsetsPerTrigger``). ``starting_offsets`` applies
when a query starts without a checkpoint; a restarted query goes on from its checkpoint.

Spark drives it on the driver: :meth:`SegmentStoreStreamReader.latestOffset` reads the selected
manifests (so segments created since, that match a prefix, join the stream) and decides where
the next micro-batch ends (:mod:`segmentstore.jobs.stream_offsets`); ``partitions`` plans that
range as a batch scan does, with each segment's end known to be an event boundary; executors
read the partitions as in a batch scan. Spark writes each micro-batch's offsets to the
checkpoint before running it and its sink commits the batch, which is what makes a restart
neither repeat nor skip an event.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxBytes

from segmentstore.jobs.errors import ScanOptionsError
from segmentstore.jobs.options import EARLIEST, LATEST, ScanOptions, SegmentSelection
from segmentstore.jobs.partition_reader import read_partition
from segmentstore.jobs.planner import ScanPartition, plan_scan, selected_manifests
from segmentstore.jobs.storage_cache import open_storage
from segmentstore.jobs.stream_offsets import flushed_offsets, next_offsets
from segmentstore.tier2 import ChunkStorage, SegmentManifest

MAX_BYTES_OPTION = "maxbytespertrigger"


@dataclass(frozen=True)
class StreamOptions:
    scan: ScanOptions
    max_bytes_per_trigger: int | None

    @staticmethod
    def parse(options: Mapping[str, str]) -> StreamOptions:
        given = {str(k).lower(): str(v) for k, v in options.items()}
        if "ending_offsets" in given:
            raise ScanOptionsError("a stream has no ending_offsets (it reads what is flushed)")
        if given.get("mode", "events").lower() != "events":
            raise ScanOptionsError("a stream reads events only (mode=events)")
        text = given.pop(MAX_BYTES_OPTION, None)
        limit = None
        if text is not None:
            try:
                limit = int(text)
            except ValueError:
                limit = 0
            if limit < 1:
                raise ScanOptionsError(f"maxBytesPerTrigger must be a positive integer: {text!r}")
        return StreamOptions(ScanOptions.parse(given), limit)


class SegmentStoreStreamReader(DataSourceStreamReader):
    def __init__(self, options: StreamOptions) -> None:
        self.options = options

    def _storage(self) -> ChunkStorage:
        scan = self.options.scan
        return open_storage(scan.tier2_uri, scan.tier2_options)

    def _manifests(self) -> list[SegmentManifest]:
        return selected_manifests(self.options.scan, self._storage(), required=False)

    def initialOffset(self) -> dict[str, int]:
        wanted = self.options.scan.starting_offsets
        manifests = self._manifests()
        latest = flushed_offsets(
            [m for m in manifests if wanted.get(m.name, EARLIEST) == LATEST], self._storage()
        )
        offsets = {name: offset for name, offset in wanted.items() if offset >= 0}
        for manifest in manifests:
            chosen = wanted.get(manifest.name, EARLIEST)
            if chosen == EARLIEST:
                offsets[manifest.name] = manifest.start_offset
            elif chosen == LATEST:
                offsets[manifest.name] = latest[manifest.name]
        return offsets

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.options.max_bytes_per_trigger
        return ReadAllAvailable() if limit is None else ReadMaxBytes(limit)

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        return next_offsets(
            start,
            self._manifests(),
            self._storage(),
            max_bytes=limit.max_bytes if isinstance(limit, ReadMaxBytes) else None,
            fail_on_data_loss=self.options.scan.fail_on_data_loss,
        )

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        names = sorted(n for n, stop in end.items() if stop > start.get(n, -1))
        if not names:
            return []
        scan = ScanOptions(
            tier2_uri=self.options.scan.tier2_uri,
            tier2_options=self.options.scan.tier2_options,
            segments=SegmentSelection(tuple(names), ()),
            starting_offsets={n: start.get(n, EARLIEST) for n in names},
            ending_offsets={n: end[n] for n in names},
            fail_on_data_loss=self.options.scan.fail_on_data_loss,
        )
        plan = plan_scan(scan, self._storage(), exact_ends=True)
        return [InputPartition(partition) for partition in plan.partitions]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        spec: Any = partition.value
        if not isinstance(spec, ScanPartition):
            return iter(())
        return read_partition(
            self._storage(), spec, fail_on_data_loss=self.options.scan.fail_on_data_loss
        )

    def commit(self, end: dict[str, int]) -> None:
        """Nothing to release: Tier 2 belongs to the store, which truncates it by its own
        retention rules, never because a query has read it."""
