"""The error tree: every leaf has its own docs/api.md code and structured fields."""

from __future__ import annotations

import ast
import builtins
from collections.abc import Callable
from pathlib import Path

from error_samples import documented_errors

import segmentstore
from segmentstore.contracts.errors import (
    ContainerFailureError,
    DataCorruptionError,
    SegmentStoreError,
    Tier2ReconciliationError,
    leaf_error_classes,
)

# docs/api.md's codes of store errors (the others are Starlette's refusals: no such route or
# method).
API_CODES = {code for status in documented_errors().values() for code in status.codes} - {
    "not_found",
    "method_not_allowed",
}


def test_every_api_code_has_exactly_one_leaf() -> None:
    codes = [cls.code for cls in leaf_error_classes()]
    assert sorted(codes) == sorted(API_CODES)


def test_every_leaf_is_exported() -> None:
    for cls in leaf_error_classes():
        assert getattr(segmentstore, cls.__name__) is cls
        assert cls.__name__ in segmentstore.__all__
        assert issubclass(cls, SegmentStoreError)


# The core: everything of the server but its tools (bench, drill, cli) and the client, whose
# own errors (UnknownOffsetError, WriterClosedError) say what happened on the client's side.
ROOT = Path(__file__).resolve().parents[2]
CORE_FOLDERS = ["contracts", "metadata", "logs", "reading", "writer", "containers", "cluster"]
CORE_SOURCES = sorted(
    [*(ROOT / "segmentstore").glob("*.py")]
    + [p for folder in CORE_FOLDERS for p in (ROOT / "segmentstore" / folder).rglob("*.py")]
    + [*(ROOT / "api").rglob("*.py")]
)
_BUILTIN_EXCEPTIONS = {
    name
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException)
}


def _bare_exception_classes(source: str, name: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and node.name != "SegmentStoreError":
            bases = {b.id for b in node.bases if isinstance(b, ast.Name)}
            if bases & _BUILTIN_EXCEPTIONS:
                found.append(f"{name}:{node.lineno} {node.name}")
    return found


def _exact_error_type_checks(source: str, name: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Compare)
            and isinstance(node.left, ast.Call)
            and isinstance(node.left.func, ast.Name)
            and node.left.func.id == "type"
            and any(
                isinstance(c, ast.Name) and c.id.endswith(("Error", "Exception"))
                for c in node.comparators
            )
        ):
            found.append(f"{name}:{node.lineno}")
    return found


def _each(paths: list[Path], check: Callable[[str, str], list[str]]) -> list[str]:
    return [f for path in paths for f in check(path.read_text(), str(path.relative_to(ROOT)))]


def test_the_core_raises_only_the_tree() -> None:
    """Every error class of the core is under SegmentStoreError (the storage leaves keep roots
    of their own, which the core translates at the boundary)."""
    found = _each(CORE_SOURCES, _bare_exception_classes)
    assert not found, found


def test_errors_are_told_apart_by_class_not_by_exact_type() -> None:
    folders = ("segmentstore", "api", "tier1", "tier2", "cache", "jobs")
    sources = sorted(p for folder in folders for p in (ROOT / folder).rglob("*.py"))
    found = _each(sources, _exact_error_type_checks)
    assert not found, found


def test_the_checks_find_what_they_look_for() -> None:
    bad = "class E(RuntimeError): ...\nclass F(E): ...\nok = type(e) is SegmentStoreError\n"
    assert _bare_exception_classes(bad, "bad.py") == ["bad.py:1 E"]
    assert _exact_error_type_checks(bad, "bad.py") == ["bad.py:3"]


def test_container_failures_are_permanent_and_never_on_the_wire() -> None:
    from segmentstore.containers.failures import is_permanent
    from segmentstore.logs.data_frame import FrameFormatError
    from segmentstore.logs.operations import LogReplayError

    failures = [
        FrameFormatError("frame at 7 has an unknown format"),
        LogReplayError("sequence 9 after 7"),
        Tier2ReconciliationError("a/0", 10, 4),
    ]
    wire = set(leaf_error_classes())
    for failure in failures:
        assert isinstance(failure, DataCorruptionError | Tier2ReconciliationError)
        assert isinstance(failure, ContainerFailureError)
        assert is_permanent(failure)
        assert type(failure) not in wire
    assert not is_permanent(SegmentStoreError("a bug met once"))
