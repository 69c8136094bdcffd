"""Errors of Tier 1 data logs.

DataLogError
├── DataLogLockedError      another process owns the log
├── DataLogFencedError      a newer epoch took the log over; this owner must stop
├── DataLogCorruptionError  a record that is not at the tail fails its checksum
├── DataLogWriteError       the medium refused a write or a sync; nothing after it is durable
└── DataLogClosedError      the log was closed while a call was pending
"""

import errno as _errno


class DataLogError(Exception):
    """Root of every Tier 1 error."""


class DataLogLockedError(DataLogError):
    def __init__(self, path: str) -> None:
        super().__init__(f"data log {path} is owned by another process")
        self.path = path


class DataLogFencedError(DataLogError):
    def __init__(self, epoch: int, newer_epoch: int) -> None:
        super().__init__(f"data log fenced: epoch {epoch} superseded by {newer_epoch}")
        self.epoch = epoch
        self.newer_epoch = newer_epoch


class DataLogCorruptionError(DataLogError):
    def __init__(self, path: str, address: int, reason: str) -> None:
        super().__init__(f"corrupt record in {path} at address {address}: {reason}")
        self.path = path
        self.address = address
        self.reason = reason


class DataLogWriteError(DataLogError):
    """``errno`` is the OS error number when the medium gave one (ENOSPC: out of space)."""

    def __init__(self, message: str, errno: int | None = None) -> None:
        super().__init__(message)
        self.errno = errno

    @property
    def out_of_space(self) -> bool:
        """The medium is full (or over quota): the log works again once there is room."""
        return self.errno in (_errno.ENOSPC, _errno.EDQUOT)


class DataLogClosedError(DataLogError):
    pass
