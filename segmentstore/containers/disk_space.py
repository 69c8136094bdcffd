"""The room left on the local file systems the tiers keep their bytes on, for ``/metrics``.

Tier 1 has one when it is the local write-ahead log (``<data_dir>/tier1``), Tier 2 when it is a
``file://`` directory. Tier 1 on JetStream and Tier 2 on S3 or HDFS have none here: their
servers report their own room. Each figure costs one ``statvfs``, asked when Prometheus scrapes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from segmentstore.data_dir import TIER1_DIR
from segmentstore.settings import Settings
from segmentstore.tier2 import InvalidTier2UriError
from segmentstore.tier2.location import Tier2Location


@dataclass(frozen=True, slots=True)
class DiskSpace:
    avail_bytes: int  # what the store (not root) may still write
    size_bytes: int
    read_only: bool  # mounted read-only: every write fails, whatever the room


def local_tier_directories(settings: Settings) -> dict[str, Path]:
    """``tier1`` and ``tier2`` -> the local directory that tier keeps its bytes in, for the
    tiers that keep them on a local file system."""
    found: dict[str, Path] = {}
    if settings.tier1.mode == "local":
        found["tier1"] = settings.store.data_dir / TIER1_DIR
    try:
        location = Tier2Location.parse(settings.tier2_uri())
    except InvalidTier2UriError:
        return found  # the store refuses to start with it: nothing to measure
    if location.scheme == "file":
        found["tier2"] = Path(location.path)
    return found


def disk_space(directory: Path) -> DiskSpace | None:
    """The file system that holds ``directory`` (or its nearest existing parent, before the
    store made it); None if it cannot be asked."""
    for candidate in (directory, *directory.absolute().parents):
        try:
            stats = os.statvfs(candidate)
        except FileNotFoundError:
            continue
        except OSError:
            return None
        return DiskSpace(
            avail_bytes=stats.f_bavail * stats.f_frsize,
            size_bytes=stats.f_blocks * stats.f_frsize,
            read_only=bool(stats.f_flag & os.ST_RDONLY),
        )
    return None
