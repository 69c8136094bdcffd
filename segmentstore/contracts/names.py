"""Segment and attribute names: what docs/api.md allows, checked before anything touches storage."""

from __future__ import annotations

import re
import uuid

from segmentstore.contracts.errors import InvalidArgumentError, InvalidNameError

TRANSACTION_MARKER = "#transaction."
_NAME_CHARS = re.compile(r"[A-Za-z0-9._\-~/#]{1,255}")
_ATTRIBUTE_KEY = re.compile(r"[A-Za-z0-9._:\-]{1,64}")
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1


def validate_segment_name(name: object) -> str:
    """Return ``name`` if it is a valid segment name, else raise ``InvalidNameError``."""
    if not isinstance(name, str) or not _NAME_CHARS.fullmatch(name):
        raise InvalidNameError(
            f"invalid segment name {name!r}: 1 to 255 characters of A-Z a-z 0-9 . _ - ~ / #"
        )
    if name.startswith("/") or name.endswith("/"):
        raise InvalidNameError(f"invalid segment name {name!r}: leading or trailing '/'")
    for component in name.split("/"):
        if component in ("", ".", ".."):
            raise InvalidNameError(
                f"invalid segment name {name!r}: empty, '.' or '..' path component"
            )
    return name


def transaction_name(parent: str) -> str:
    """A new, unique transaction segment name for ``parent``."""
    return f"{parent}{TRANSACTION_MARKER}{uuid.uuid4().hex}"


def transaction_parent(name: str) -> str | None:
    """The segment a transaction segment commits into, or None for a plain segment.

    A transaction may have transactions of its own (``T#transaction.<id>`` commits into
    ``T``), so this cuts at the last marker; every one of them lives in the container of the
    root, which the container mapping finds by cutting at the first.
    """
    cut = name.rfind(TRANSACTION_MARKER)
    return name[:cut] if cut >= 0 else None


def validate_attribute_key(key: object) -> str:
    if not isinstance(key, str) or not _ATTRIBUTE_KEY.fullmatch(key):
        raise InvalidArgumentError(
            f"invalid attribute key {key!r}: 1 to 64 characters of A-Z a-z 0-9 . _ : -"
        )
    return key


def validate_int64(what: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not INT64_MIN <= value <= INT64_MAX:
        raise InvalidArgumentError(f"{what} must be a signed 64-bit integer, not {value!r}")
    return value
