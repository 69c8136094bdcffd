"""Which container failures heal by themselves, and which need a person.

A container that fails goes ``read_only`` (Tier 1 is out of space: acknowledged data is still
served) or ``offline``. The supervisor recovers it again with capped backoff unless the failure
is one that recovery can never get past: a corrupt record in the middle of Tier 1, an operation
that does not replay, a newer owner that fenced this one out, or a Tier 2 that holds more than
Tier 1 knows of. Those stay offline with their message until someone acts; every other failure
(a full or failing disk, an unreachable Tier 2, a bug met once) is worth another recovery.
"""

from __future__ import annotations

from segmentstore.contracts.errors import ContainerFailureError, InsufficientStorageError
from segmentstore.tier1 import DataLogCorruptionError, DataLogFencedError, DataLogWriteError
from segmentstore.tier2 import FencedError

# ContainerFailureError: a corrupt frame, an operation that does not replay, a Tier 2 ahead of
# Tier 1. The storage leaves' own: a corrupt Tier 1 record, a newer owner in Tier 1 or Tier 2.
_PERMANENT: tuple[type[BaseException], ...] = (
    ContainerFailureError,
    DataLogCorruptionError,
    DataLogFencedError,
    FencedError,
)


def is_permanent(error: BaseException | None) -> bool:
    """Whether recovering the container again can never get past ``error``."""
    return isinstance(error, _PERMANENT)


def is_out_of_space(error: BaseException | None) -> bool:
    """Tier 1's medium is full: recovery must wait until it has room again."""
    if isinstance(error, InsufficientStorageError):
        return True
    return isinstance(error, DataLogWriteError) and error.out_of_space


def is_fenced(error: BaseException | None) -> bool:
    """A newer owner of the container raised its epoch: this one must stop serving it."""
    return isinstance(error, DataLogFencedError | FencedError)
