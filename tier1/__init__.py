"""Tier 1: durable data logs, the fast write-ahead medium of a segment container.

A leaf package: May import: nothing of the project. The core talks to it through
:class:`DurableDataLog` and translates :class:`DataLogError` leaves at its boundary.
"""

from segmentstore.tier1.errors import (
    DataLogClosedError,
    DataLogCorruptionError,
    DataLogError,
    DataLogFencedError,
    DataLogLockedError,
    DataLogWriteError,
)
from segmentstore.tier1.local import LocalDurableDataLog
from segmentstore.tier1.log import DurableDataLog, LogRecord

__all__ = [
    "DataLogClosedError",
    "DataLogCorruptionError",
    "DataLogError",
    "DataLogFencedError",
    "DataLogLockedError",
    "DataLogWriteError",
    "DurableDataLog",
    "LocalDurableDataLog",
    "LogRecord",
]
