"""Container recovery: rebuild metadata (and, through ``apply``, the indexes) from Tier 1.

The log starts with a checkpoint, because the Durable Log writes one at every start and only
ever truncates Tier 1 at a checkpoint. Replay restores that snapshot and applies every later
operation in order with the same ``Operation.apply`` the live path uses. Operations before the
first checkpoint (sharing its frame) are already contained in it and are skipped. Every
operation written takes the next sequence number, so a gap or a repeat stops the replay: it is
a log that lost or mixed records.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from segmentstore.logs.data_frame import DataFrameReader
from segmentstore.logs.operations import CheckpointOperation, LogReplayError, Operation
from segmentstore.metadata.container_metadata import ContainerMetadata
from segmentstore.tier1 import DurableDataLog


@dataclass(slots=True)
class RecoveryStats:
    records_read: int = 0
    operations_replayed: int = 0
    checkpoints_seen: int = 0
    seconds: float = 0.0


async def replay(
    container_id: int,
    epoch: int,
    data_log: DurableDataLog,
    restore: Callable[[ContainerMetadata], None],
    apply: Callable[[ContainerMetadata, Operation], None],
    stats: RecoveryStats,
) -> ContainerMetadata:
    """Read the whole log and return the recovered metadata.

    ``restore`` sees the first checkpoint's metadata, then ``apply`` each later operation.
    """
    reader = DataFrameReader()
    metadata: ContainerMetadata | None = None
    async for record in data_log.read():
        stats.records_read += 1
        for op in reader.read(record.address, record.data):
            if metadata is None:
                if not isinstance(op, CheckpointOperation):
                    continue
                metadata = ContainerMetadata.from_snapshot(op.snapshot, epoch)
                if metadata.container_id != container_id:
                    raise LogReplayError(
                        f"log holds container {metadata.container_id}, not {container_id}"
                    )
                restore(metadata)
            elif op.sequence != metadata.sequence + 1:
                # Every operation written takes the next number: one out of order, or a gap,
                # is a log that lost or mixed records, and replaying on would serve segments
                # without what they acknowledged.
                raise LogReplayError(f"sequence {op.sequence} after {metadata.sequence}")
            if isinstance(op, CheckpointOperation):
                stats.checkpoints_seen += 1
            apply(metadata, op)
            stats.operations_replayed += 1
    if metadata is None:
        if stats.records_read:
            raise LogReplayError("the log has records but no checkpoint")
        metadata = ContainerMetadata(container_id=container_id, epoch=epoch)
    return metadata
