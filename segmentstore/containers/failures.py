"""Which container failures heal by themselves, and which need a person.

A container that fails goes ``read_only`` (Tier 1 is out of space: acknowledged data is still
served) or ``offline``. The supervisor recovers it again with capped backoff unless the failure
is one that recovery can never get past: a corrupt record in the middle of Tier 1, an operation
that does not replay, a newer owner that fenced this one out, or a Tier 2 that holds more than
Tier 1 knows of. Those stay offline with their message until someone acts; every other failure
(a full or failing disk, an unreachable Tier 2, a bug met once) is worth another recovery.
"""

from __future__ import annotations

from segmentstore.contracts.errors import InsufficientStorageError, SegmentStoreError
from segmentstore.logs.data_frame import FrameFormatError
from segmentstore.logs.operations import LogReplayError
from segmentstore.tier1 import DataLogCorruptionError, DataLogFencedError, DataLogWriteError
from segmentstore.tier2 import FencedError

_PERMANENT: tuple[type[BaseException], ...] = (
    DataLogCorruptionError,
    FrameFormatError,
    LogReplayError,
    DataLogFencedError,
    FencedError,
)


def is_permanent(error: BaseException | None) -> bool:
    """Whether recovering the container again can never get past ``error``."""
    if isinstance(error, _PERMANENT):
        return True
    # Reconciling with Tier 2 raises the root error itself when Tier 2 holds more of a segment
    # than Tier 1 knows of: acknowledged data was lost from Tier 1, and a person must look.
    return type(error) is SegmentStoreError


def is_out_of_space(error: BaseException | None) -> bool:
    """Tier 1's medium is full: recovery must wait until it has room again."""
    if isinstance(error, InsufficientStorageError):
        return True
    return isinstance(error, DataLogWriteError) and error.out_of_space


def is_fenced(error: BaseException | None) -> bool:
    """A newer owner of the container raised its epoch: this one must stop serving it."""
    return isinstance(error, DataLogFencedError | FencedError)
