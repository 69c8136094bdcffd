"""What a segment container shows of itself: the figures ``/v1/containers`` and the metrics
read, and the health checks the supervisor asks before it recovers a failed container."""

from __future__ import annotations

from segmentstore.containers.container_base import ContainerBase
from segmentstore.containers.retention import RetentionEnforcer
from segmentstore.metadata.container_metadata import ContainerMetadata
from segmentstore.writer.writer import Writer


class ContainerGauges(ContainerBase):
    """Read-only views over the state a :class:`SegmentContainer` keeps."""

    @property
    def segment_count(self) -> int:
        """Every segment the container holds, active or not."""
        return self._durable.segment_count

    @property
    def active_segment_count(self) -> int:
        """The segments in memory now."""
        return len(self._durable.segments)

    @property
    def last_sequence(self) -> int:
        return self._durable.sequence

    @property
    def checkpoint_bytes(self) -> int:
        """The size of the last checkpoint (it grows with the active segments)."""
        return 0 if self._log is None else self._log.checkpoint_bytes

    @property
    def tier1_written_bytes(self) -> int:
        """Bytes written to Tier 1 since the container last started."""
        return 0 if self._log is None else self._log.written_bytes

    @property
    def tier1_bytes(self) -> int:
        return 0 if self._data_log is None else self._data_log.size_bytes

    @property
    def tier2_lag_bytes(self) -> int:
        return 0 if self._writer is None else self._writer.lag_bytes

    @property
    def storage_writer(self) -> Writer | None:
        return self._writer

    @property
    def retention(self) -> RetentionEnforcer | None:
        return self._retention_enforcer

    @property
    def retention_lag_ms(self) -> int:
        return 0 if self._retention_enforcer is None else self._retention_enforcer.lag_ms

    @property
    def retention_truncated_bytes(self) -> int:
        enforcer = self._retention_enforcer
        return 0 if enforcer is None else enforcer.truncated_bytes

    @property
    def durable_metadata(self) -> ContainerMetadata:
        """The durable metadata (read-only use: tests check invariants against it)."""
        return self._durable

    @property
    def tier2_error(self) -> str | None:
        """The Tier 2 failure the Storage Writer is retrying, if any."""
        return None if self._writer is None else self._writer.last_error

    def tier1_has_room(self, nbytes: int) -> bool:
        """Whether Tier 1's medium has about ``nbytes`` free (unknown counts as yes)."""
        return True if self._data_log is None else self._data_log.has_room(nbytes)
