"""The error leaves as tests need them: one instance of each, and docs/api.md's table.

Both are read from the one declaration (:mod:`segmentstore.contracts.errors`) and the one
document, so that a new error needs nothing here: its sample is built from its constructor,
and its row is read from the document.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field
from pathlib import Path

from segmentstore.contracts.errors import SegmentStoreError, leaf_error_classes

DOCUMENT = Path(__file__).resolve().parents[2] / "docs" / "api.md"
_VALUES = {"str": "s", "int": 7, "int | None": 3}
_NAME = re.compile(r"`([a-z_]+)`")


def sample(cls: type[SegmentStoreError]) -> SegmentStoreError:
    """An instance of ``cls``, its constructor's required arguments filled in by their
    types (those with a default keep it)."""
    parameters = list(inspect.signature(cls.__init__).parameters.values())[1:]
    required = [p for p in parameters if p.default is inspect.Parameter.empty]
    return cls(*(_VALUES[str(p.annotation)] for p in required))


def samples() -> list[SegmentStoreError]:
    return [sample(cls) for cls in leaf_error_classes()]


@dataclass
class DocumentedStatus:
    """One status of docs/api.md's table of errors."""

    codes: set[str] = field(default_factory=set)
    fields: set[str] = field(default_factory=set)
    retry_after: bool = False


def documented_errors() -> dict[int, DocumentedStatus]:
    """docs/api.md, Errors: each status's row."""
    text = DOCUMENT.read_text()
    start = text.index("| status | code | fields |", text.index("### Errors"))
    rows = text[start : text.index("\n\n", start)].splitlines()[2:]
    found: dict[int, DocumentedStatus] = {}
    for row in rows:
        status, codes, fields = (cell.strip() for cell in row.strip().strip("|").split("|"))
        entry = found.setdefault(int(status), DocumentedStatus())
        entry.codes |= set(_NAME.findall(codes))
        entry.fields |= set(_NAME.findall(fields))
        entry.retry_after |= "Retry-After" in codes
    return found
