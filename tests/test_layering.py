"""The layer arrows of DESIGN.md: leaves import nothing of the project; frameworks stay put."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROJECT = {"segmentstore", "tier1", "tier2", "cache", "api", "jobs"}
# package -> project packages it may import
ALLOWED = {
    "tier1": {"tier1"},
    "tier2": {"tier2"},
    "cache": {"cache"},
    "segmentstore": {"segmentstore", "tier1", "tier2", "cache"},
    "api": {"api", "segmentstore"},
    "jobs": {"jobs", "tier2"},
}
# third-party package -> the only project packages that may import it
FRAMEWORKS = {
    "fastapi": {"api"},
    "uvicorn": {"api"},
    "starlette": {"api"},
    "pyspark": {"jobs"},
    "pyarrow": {"tier1", "tier2", "jobs"},
    "boto3": {"tier1", "tier2"},
    "botocore": {"tier1", "tier2"},
    "lmdb": {"cache"},
}
COMPOSITION_ROOT = ROOT / "segmentstore" / "cli.py"  # may import api/ and jobs/ (lazily)


def imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


SOURCES = sorted(p for pkg in ALLOWED for p in (ROOT / pkg).rglob("*.py"))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_follow_the_layers(path: Path) -> None:
    package = path.relative_to(ROOT).parts[0]
    used = imports(path)
    allowed = ALLOWED[package] | ({"api", "jobs"} if path == COMPOSITION_ROOT else set())
    assert used & PROJECT <= allowed, f"{path} imports {sorted(used & PROJECT - allowed)}"
    for framework, owners in FRAMEWORKS.items():
        assert framework not in used or package in owners, f"{path} imports {framework}"


def test_environment_is_read_only_by_the_composition_root() -> None:
    for path in SOURCES:
        if path != COMPOSITION_ROOT:
            assert "os.environ" not in path.read_text(), path
