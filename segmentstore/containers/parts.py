"""What a segment container is built from (Pravega injects ``OperationLogFactory``,
``ReadIndexFactory`` and ``WriterFactory`` into its container the same way).

The container owns the order of things (recover, reconcile, serve, stop); its parts come from
these factories, so each part can be replaced by a double (a wrapper that injects failures into
the real part) and the container tested without the store. :func:`default_parts` builds the
ones the store runs, each from its own settings section.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from segmentstore.logs.durable_log import DurableLog
from segmentstore.logs.operation_log import OperationLogFactory
from segmentstore.reading.cache_manager import CacheManager
from segmentstore.reading.read_index import ReadIndexFactory, SegmentReadIndex
from segmentstore.settings import CacheSettings, DurableLogSettings, StorageWriterSettings
from segmentstore.tier1 import DurableDataLog
from segmentstore.tier2 import ChunkStorage
from segmentstore.writer.storage_writer import StorageWriter
from segmentstore.writer.writer import Writer, WriterFactory, WriterHost


@dataclass(frozen=True)
class ContainerParts:
    # A fresh, unopened Tier 1 log for container N; each start opens a new one.
    data_log: Callable[[int], DurableDataLog]
    operation_log: OperationLogFactory
    read_index: ReadIndexFactory
    writer: WriterFactory
    # Tier 1 frees space a whole file at a time: tracking which operations it must keep any
    # finer than a file gains nothing (tier1.segment_bytes / 8).
    tier1_coalesce_bytes: int


def default_parts(
    data_log: Callable[[int], DurableDataLog],
    durable_log: DurableLogSettings,
    cache: CacheSettings,
    cache_manager: CacheManager,
    storage_writer: StorageWriterSettings,
    storage: ChunkStorage,
    tier1_segment_bytes: int,
) -> ContainerParts:
    """Today's parts: a ``DurableLog``, ``SegmentReadIndex``es over the shared cache and a
    ``StorageWriter`` over the Tier 2 ``storage``."""

    def read_index() -> SegmentReadIndex:
        return SegmentReadIndex(cache_manager.cache, cache_manager.clock, cache.max_entry_bytes)

    def writer(container_id: int, epoch: int, host: WriterHost) -> Writer:
        return StorageWriter(container_id, epoch, storage, storage_writer, host)

    return ContainerParts(
        data_log=data_log,
        operation_log=functools.partial(DurableLog, settings=durable_log),
        read_index=read_index,
        writer=writer,
        tier1_coalesce_bytes=tier1_segment_bytes // 8,
    )
