"""The state a segment container keeps, declared once for the sides of it that read it: its
gauges (:mod:`.gauges`), its reads (:mod:`.reads`) and what its Storage Writer and active
segments call back into (:mod:`.host_side`); :class:`~.container.SegmentContainer` sets it
up and changes it. Also the two questions every side asks of it: why a change is refused
now, and where a segment's time index is kept.
"""

from __future__ import annotations

from segmentstore.containers.active_segments import ActiveSegments
from segmentstore.containers.commit_effects import CommitEffects
from segmentstore.containers.retention import RetentionEnforcer
from segmentstore.containers.status import READ_ONLY, ContainerStatus
from segmentstore.contracts.errors import (
    ContainerUnavailableError,
    InsufficientStorageError,
    SegmentStoreError,
)
from segmentstore.logs.operation_log import OperationLog
from segmentstore.metadata.container_metadata import ContainerMetadata, SegmentMetadata
from segmentstore.metadata.time_index import SegmentTimeIndex
from segmentstore.tier1 import DurableDataLog
from segmentstore.writer.writer import Writer


class ContainerBase:
    """What a :class:`~.container.SegmentContainer` holds; each start builds it anew."""

    id: int
    status: ContainerStatus
    failure: str | None
    _durable: ContainerMetadata
    _log: OperationLog | None
    _data_log: DurableDataLog | None
    _writer: Writer | None
    _retention_enforcer: RetentionEnforcer | None
    _effects: CommitEffects
    _active: ActiveSegments

    def _refusal(self) -> SegmentStoreError:
        """Why a change is refused while the container is not running."""
        if self.status is READ_ONLY:
            return InsufficientStorageError(
                f"container {self.id} serves reads only until Tier 1 has room: {self.failure}"
            )
        return ContainerUnavailableError(self.id, self.failure or self.status.value)

    def _time_index_of(self, segment: SegmentMetadata) -> SegmentTimeIndex:
        """The time index of a (durable) segment, kept in the accepted metadata; empty if
        the accepted copy no longer has the segment (a delete under way)."""
        keeper = self._durable if self._log is None else self._log.accepted
        found = keeper.by_id.get(segment.id)
        return SegmentTimeIndex() if found is None else found.time_index
