"""The store's checks of its callers' arguments, before anything reaches a container."""

from __future__ import annotations

from segmentstore.contracts.errors import InvalidArgumentError
from segmentstore.contracts.names import validate_int64


def whole_bytes(view: memoryview) -> memoryview | bytes:
    """``view`` as a buffer whose ``len`` is its size in bytes, which every layer below counts
    by: a view of wider items or of several dimensions (``len`` counts items or rows) is cast,
    and one that is not contiguous is copied."""
    if view.itemsize == view.ndim == 1 and view.contiguous:
        return view
    return view.cast("B") if view.c_contiguous else view.tobytes()


def non_negative(what: str, value: object) -> int:
    number = validate_int64(what, value)
    if number < 0:
        raise InvalidArgumentError(f"{what} must not be negative, not {number}")
    return number


def retention_policy(retention: dict[str, int] | None) -> dict[str, int]:
    policy = {}
    for key, value in (retention or {}).items():
        if key not in ("time_ms", "bytes"):
            raise InvalidArgumentError(f"unknown retention policy {key!r}")
        policy[key] = non_negative(f"retention.{key}", value)
    return policy
