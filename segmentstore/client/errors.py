"""Error answers back into the store's own exceptions: one ``error.code`` → one leaf class.

The server sends every error as ``{"error": {"code", "message", ...fields}}`` (docs/api.md,
Errors), built from a :class:`~segmentstore.contracts.errors.SegmentStoreError` leaf and its
``fields()``. This module reverses that: the leaf whose ``code`` matches is rebuilt with its
message and fields, so ``except BadOffsetError as e: e.length`` reads the same over HTTP as
embedded. A code no leaf has (``not_found``, ``not_implemented``, ``internal``), or an answer
that is not the JSON shape at all (a proxy's HTML page), becomes a plain ``SegmentStoreError``
whose ``code`` is the server's code (or ``http_<status>``).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping
from typing import Any

from segmentstore.contracts.errors import SegmentStoreError, leaf_error_classes

from .reply import Answer

_LEAVES: dict[str, type[SegmentStoreError]] = {cls.code: cls for cls in leaf_error_classes()}

# Attributes some leaves take in their constructor but do not put on the wire (``name`` of
# SegmentNotFoundError, ``container`` of ContainerNotFoundError); the request supplies them.
_CONTEXT_ATTRIBUTES = ("name", "container")


def _context_attributes(cls: type[SegmentStoreError]) -> tuple[str, ...]:
    parameters = inspect.signature(cls.__init__).parameters
    return tuple(a for a in _CONTEXT_ATTRIBUTES if a in parameters)


_CONTEXT = {code: _context_attributes(cls) for code, cls in _LEAVES.items()}


def build_error(
    code: str, message: str, fields: Mapping[str, Any], context: Mapping[str, Any]
) -> SegmentStoreError:
    """The leaf for ``code``, with ``fields`` from the wire and ``context`` (what the request
    was about: ``name``, ``container``) for the attributes the wire leaves out."""
    cls = _LEAVES.get(code)
    if cls is None:
        error = SegmentStoreError(message)
        # The class attribute says "internal"; the instance keeps what the server said.
        vars(error)["code"] = code
        return error
    # Leaves' constructors compose their own message from arguments the wire does not carry
    # (a reason, a size); bypass them and set what the server sent instead.
    error = cls.__new__(cls)
    SegmentStoreError.__init__(error, message)
    for attribute in cls._field_names:
        setattr(error, attribute, fields.get(attribute))
    for attribute in _CONTEXT[code]:
        if attribute not in vars(error):
            setattr(error, attribute, fields.get(attribute, context.get(attribute)))
    return error


def error_from_response(
    response: Answer, context: Mapping[str, Any] | None = None
) -> SegmentStoreError:
    """The exception an error answer stands for (its body must have been read)."""
    status = response.status_code
    try:
        body = json.loads(response.content)
        detail = body["error"]
        code = detail["code"]
        message = detail.get("message", "")
        if not isinstance(code, str) or not isinstance(message, str):
            raise TypeError(code)
    except (ValueError, TypeError, KeyError):
        text = response.content[:200].decode("utf-8", "replace")
        return build_error(f"http_{status}", f"HTTP {status}: {text}", {}, {})
    return build_error(code, message, detail, context or {})
