"""What a rebuild from Tier 2 restored, and what it could not: the operator's record of it.

Tier 2 keeps, per segment, what its manifest says: name, segment id, start offset, storage
length, whether it is sealed, and, when the manifest is complete (its state was saved with the
last bytes it names: a segment that had left memory, or that was flushed whole), everything
else the segment carries (attributes, writer sequences, retention, times). What was appended
after the last flush is lost with Tier 1 (:data:`LOST_WITH_TIER1`); for a segment whose
manifest is not complete, so is its state (:data:`LOST_WITHOUT_STATE`); and so is every
segment that never reached Tier 2. The report says so per segment (a log line each), in a
summary line, and as a JSON document kept in the data directory (``docs/formats.md``, the
rebuild report).
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from segmentstore.data_dir import sync_directory
from segmentstore.tier2 import SegmentManifest

log = logging.getLogger(__name__)

REPORT_FILE = "rebuild-report.json"
REPORT_FORMAT = 1

# What each rebuilt segment had in Tier 1 only.
LOST_WITH_TIER1 = (
    "what changed after the segment's last flush to Tier 2 (bytes appended, attributes,"
    " retention, exactly-once sequences)",
)
# What a segment whose manifest did not keep its state had in Tier 1 only.
LOST_WITHOUT_STATE = (
    "attributes",
    "writer ids and sequence numbers (exactly-once appends)",
    "retention policy",
    "creation and modification times (set to the rebuild time)",
)
LOST_SEGMENTS = "segments whose bytes never reached Tier 2 (they have no manifest)"


@dataclass(frozen=True, slots=True)
class RebuiltSegment:
    name: str
    segment_id: int
    start_offset: int
    length: int
    sealed: bool
    # whether its manifest kept its state (attributes, writer sequences, ...): restored too
    state_kept: bool = False
    # the byte ranges Tier 2 holds but cannot prove (checksums that fail, a chunk short or
    # missing): restored as part of the length, but every read of them is refused
    damaged: tuple[str, ...] = ()

    @classmethod
    def of(cls, manifest: SegmentManifest, damaged: tuple[str, ...] = ()) -> RebuiltSegment:
        return cls(
            manifest.name,
            manifest.segment_id,
            manifest.start_offset,
            manifest.storage_length,
            manifest.sealed,
            manifest.complete,
            damaged,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "segment_id": self.segment_id,
            "start_offset": self.start_offset,
            "length": self.length,
            "sealed": self.sealed,
            "state_kept": self.state_kept,
            "damaged": list(self.damaged),
        }


@dataclass(frozen=True, slots=True)
class ContainerRebuild:
    """Container ``container``'s Tier 1 at ``epoch``: rebuilt from its Tier 2 ``segments``,
    or ``kept`` because it already held records (its Tier 1 was not lost, or an interrupted
    rebuild had already written it)."""

    container: int
    epoch: int
    segments: tuple[RebuiltSegment, ...]
    kept: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "container": self.container,
            "epoch": self.epoch,
            "tier1": "kept" if self.kept else "rebuilt",
            "segments": [s.to_json() for s in self.segments],
        }


@dataclass(slots=True)
class RebuildReport:
    tier2_uri: str
    rebuilt_at_ms: int
    containers: list[ContainerRebuild] = field(default_factory=list)

    @property
    def segments(self) -> int:
        return sum(len(c.segments) for c in self.containers if not c.kept)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": REPORT_FORMAT,
            "rebuilt_at_ms": self.rebuilt_at_ms,
            "tier2_uri": self.tier2_uri,
            "lost_for_every_segment": list(LOST_WITH_TIER1),
            "lost_where_state_not_kept": list(LOST_WITHOUT_STATE),
            "lost_entirely": LOST_SEGMENTS,
            "containers": [c.to_json() for c in self.containers],
        }

    def log_lines(self) -> None:
        """One warning per rebuilt segment and per kept container, then the summary."""
        lost = ", ".join(LOST_WITH_TIER1)
        lost_state = ", ".join((*LOST_WITHOUT_STATE, *LOST_WITH_TIER1))
        for container in self.containers:
            if container.kept:
                log.warning(
                    "container %d: Tier 1 already holds records, left as it is (epoch %d)",
                    container.container,
                    container.epoch,
                )
                continue
            for s in container.segments:
                log.warning(
                    "rebuilt %r in container %d (segment id %d) from Tier 2: bytes [%d, %d)%s;"
                    " lost with Tier 1: %s",
                    s.name,
                    container.container,
                    s.segment_id,
                    s.start_offset,
                    s.length,
                    ", sealed" if s.sealed else "",
                    lost if s.state_kept else lost_state,
                )
                for damage in s.damaged:
                    log.error("rebuilt %r holds damaged bytes in Tier 2: %s", s.name, damage)
        rebuilt = [c.container for c in self.containers if not c.kept]
        log.warning(
            "rebuilt Tier 1 of containers %s from Tier 2 at %s: %d segments restored with every"
            " flushed byte (%d with their state); lost for each: %s; for those without their"
            " state also: %s; lost entirely: %s",
            rebuilt,
            self.tier2_uri,
            self.segments,
            sum(s.state_kept for c in self.containers if not c.kept for s in c.segments),
            lost,
            ", ".join(LOST_WITHOUT_STATE),
            LOST_SEGMENTS,
        )

    def write(self, data_dir: Path) -> Path:
        """Keep the report as ``data_dir/rebuild-report.json`` (replaced whole)."""
        path = data_dir / REPORT_FILE
        temporary = path.with_suffix(".tmp")
        with open(temporary, "w") as f:
            json.dump(self.to_json(), f, indent=2)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)
        sync_directory(data_dir)  # the rename too survives a power loss
        return path
