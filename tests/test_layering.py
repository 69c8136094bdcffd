"""The layer arrows of docs/architecture.md, and those inside the core, on every source file
(the table of units and what each may import: tests/support/layers.py)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from layers import (
    ALLOWED,
    FOLDERS,
    FRAMEWORKS,
    LAZY_FOR_CLI,
    PACKAGE_SURFACE,
    ROOT,
    SOURCES,
    UNINSTALLED,
    module_of,
    project_imports,
    unit_of,
)


def violations(source: str, module: str, name: str) -> list[str]:
    unit = unit_of(module)
    allowed = {unit} | (PACKAGE_SURFACE if module == "segmentstore" else ALLOWED[unit])
    found = []
    for imported, node, at_top in project_imports(ast.parse(source, name), module):
        root = imported.split(".")[0]
        where = f"{name}:{node.lineno}"
        if root in UNINSTALLED:
            found.append(f"{where} imports {imported}: it installs as segmentstore.{imported}")
        elif root == "segmentstore":
            target = unit_of(imported)
            if target not in allowed:
                found.append(f"{where}: {unit} may not import {target} ({imported})")
            elif unit == "cli" and target in LAZY_FOR_CLI and at_top:
                found.append(f"{where}: the command line imports {imported} lazily")
        elif root in FRAMEWORKS and unit not in FRAMEWORKS[root]:
            found.append(f"{where}: {unit} may not import {root}")
    return found


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_follow_the_layers(path: Path) -> None:
    found = violations(path.read_text(), module_of(path), str(path.relative_to(ROOT)))
    assert not found, "\n".join(found)


def test_every_module_belongs_to_a_unit() -> None:
    assert all(unit_of(module_of(path)) for path in SOURCES)


@pytest.mark.parametrize(
    ("module", "statement", "complaint"),
    [
        ("segmentstore.logs.x", "from segmentstore.reading.read_index import X", "logs may not"),
        ("segmentstore.logs.x", "from segmentstore.writer import storage_writer", "logs may not"),
        ("segmentstore.reading.x", "from segmentstore.containers import x", "reading may not"),
        ("segmentstore.writer.x", "import segmentstore.containers.container", "writer may not"),
        ("segmentstore.tier1.x", "from segmentstore.contracts.errors import E", "tier1 may not"),
        ("segmentstore.contracts.x", "from segmentstore.settings import S", "contracts may not"),
        ("segmentstore.client.x", "from segmentstore.settings import S", "client may not"),
        ("segmentstore.client.x", "from segmentstore.metadata import m", "client may not"),
        ("segmentstore.tier2.x", "from tier2 import ChunkStorage", "installs as"),
        ("segmentstore.containers.x", "import fastapi", "may not import fastapi"),
        ("segmentstore.bench.x", "import uvicorn", "may not import uvicorn"),
        ("segmentstore.cli", "from segmentstore.api.server import serve", "lazily"),
    ],
)
def test_a_bad_import_is_caught(module: str, statement: str, complaint: str) -> None:
    (found,) = violations(statement + "\n", module, "bad.py")
    assert complaint in found


# Not a setting read but one set for Spark: PySpark formats a failure of the Python process
# it runs a stream reader in by that process's SPARK_HIDE_TRACEBACK, which the session's
# setting does not reach (jobs/stream_reader.py says more).
_SETS_FOR_SPARK = 'os.environ.setdefault("SPARK_HIDE_TRACEBACK", "1")'


def test_environment_is_read_only_by_the_composition_root() -> None:
    for path in SOURCES:
        if unit_of(module_of(path)) != "cli":
            assert "os.environ" not in path.read_text().replace(_SETS_FOR_SPARK, ""), path


def test_every_package_folder_is_in_the_mapping() -> None:
    folders = {p.parent.name for p in ROOT.glob("*/__init__.py")} - {"tests"}
    assert folders == set(FOLDERS.values())


def test_the_folder_mapping_has_one_source() -> None:
    """setup.py and the Makefile's type-check tree read pyproject.toml; neither lists folders."""
    setup_code = [
        line for line in (ROOT / "setup.py").read_text().splitlines() if '"' in line
    ]  # string literals: a copied mapping would be one
    makefile = (ROOT / "Makefile").read_text()
    recipe = makefile[makefile.index("\ntypecheck-tree:") :].split("\n\n")[0]
    for folder in set(FOLDERS.values()) - {"segmentstore"}:
        assert not any(f'"{folder}"' in line for line in setup_code), f"setup.py names {folder}"
        assert folder not in recipe, f"the Makefile's typecheck-tree names {folder}"
    assert "package-folders" in (ROOT / "setup.py").read_text()
    assert "package-folders" in recipe
