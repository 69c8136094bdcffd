"""Segment paths with control characters are refused before routing.

Routes match with a regular expression anchored by ``$``, which in Python also matches just
before a final newline: ``PUT /v1/segments/s%0A`` would otherwise address the segment ``s``.
No valid name holds a control character (docs/api.md, Segment names), so any such path under
``/v1/segments/`` is ``400 invalid_name``, whatever follows.
"""

from __future__ import annotations

import re

from segmentstore.contracts.errors import InvalidNameError

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
SEGMENTS = "/v1/segments/"


def control_character_refusal(path: str) -> InvalidNameError | None:
    """``400 invalid_name`` for a segment path with a control character; None otherwise."""
    if path.startswith(SEGMENTS) and _CONTROL.search(path) is not None:
        name = path[len(SEGMENTS) :]
        return InvalidNameError(f"invalid segment name {name!r}: a control character")
    return None
