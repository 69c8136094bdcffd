"""The layer arrows of docs/architecture.md, and those inside the core, on every source file.

Every folder installs under one package, ``segmentstore`` (setup.py): ``tier1/`` is
``segmentstore.tier1`` and so on. A module belongs to the *unit* of the longest prefix below
that its installed name starts with; a unit may import only the units it is allowed.
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# installed package -> repository folder, from the one place that says it
FOLDERS: dict[str, str] = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"][
    "segmentstore"
]["package-folders"]
# module prefix -> unit; the longest prefix wins, and "segmentstore" itself is the vocabulary
# every part shares (errors, names, settings, results)
UNITS = {
    "segmentstore": "vocabulary",
    "segmentstore.contracts": "contracts",
    "segmentstore.tier1": "tier1",
    "segmentstore.tier2": "tier2",
    "segmentstore.cache": "cache",
    "segmentstore.metadata": "metadata",
    "segmentstore.logs": "logs",
    "segmentstore.reading": "reading",
    "segmentstore.writer": "writer",
    "segmentstore.containers": "containers",
    "segmentstore.cluster": "cluster",
    "segmentstore.store": "store",
    "segmentstore.config": "config",
    "segmentstore.api": "api",
    "segmentstore.jobs": "jobs",
    "segmentstore.client": "client",
    "segmentstore.bench": "bench",
    "segmentstore.drill": "drill",
    "segmentstore.drill.lazyfs": "lazyfs",
    "segmentstore.cli": "cli",
}
STORAGE = {"tier1", "tier2", "cache"}
CORE = {"metadata", "logs", "reading", "writer", "containers", "store"}
# unit -> the units it may import (besides itself)
# What the client and the server share; every part of the project may import it.
SHARED = {"contracts"}
ALLOWED = {
    "contracts": set(),
    "tier1": set(),
    "tier2": set(),
    "cache": set(),
    "vocabulary": SHARED,
    "metadata": {"vocabulary", *SHARED, "tier2"},
    "logs": {"vocabulary", *SHARED, "metadata", "tier1"},
    "reading": {"vocabulary", *SHARED, "metadata", "logs", "tier2", "cache"},
    "writer": {"vocabulary", *SHARED, "metadata", "logs", "tier2"},
    "containers": {"vocabulary", *SHARED, *CORE - {"store"}, *STORAGE},
    "store": {"vocabulary", *SHARED, *CORE, *STORAGE},
    "config": {"vocabulary", *SHARED},
    # a cluster node's membership: the store's containers and the leases beside Tier 1
    "cluster": {"vocabulary", *SHARED, "store", "containers", "tier1"},
    "api": {"vocabulary", *SHARED, "store", "containers", "cluster"},
    "jobs": {"tier2"},
    # the client speaks the contract and nothing else of the server: a client-only install
    # has no server code (test_client_package proves no backend loads)
    "client": SHARED,
    "bench": {"vocabulary", *SHARED, "store", "containers", "client", "tier2"},
    # the drill speaks to a deployment over HTTP only: it knows the store by its contract;
    # a cluster it spawns is bench's loopback processes (JetStream servers, cluster nodes)
    "drill": {"vocabulary", *SHARED, "bench", "lazyfs"},
    # a FUSE file system spoken straight to the kernel: it knows nothing of the store
    "lazyfs": set(),
    "cli": {
        "vocabulary",
        *SHARED,
        "config",
        "store",
        "bench",
        "drill",
        "tier2",
        "api",
        "jobs",
        "cluster",
    },
}
PACKAGE_SURFACE = {"vocabulary", *SHARED, "store"}  # what segmentstore/__init__ re-exports
# the composition root imports these only inside functions, so that `segmentstore tier2 cat`
# never loads FastAPI or Spark
LAZY_FOR_CLI = {"api", "jobs", "bench", "store", "drill", "cluster"}
# third-party package -> the only units that may import it
FRAMEWORKS = {
    "fastapi": {"api"},
    "uvicorn": {"api"},
    "starlette": {"api"},
    "pyspark": {"jobs"},
    "pyarrow": {"tier1", "tier2", "jobs"},
    "boto3": {"tier1", "tier2"},
    "botocore": {"tier1", "tier2"},
    "lmdb": {"cache"},
    "nats": {"tier1", "bench"},  # bench: the loopback JetStream cluster it starts
}
# names that only exist in the repository, never installed: importing them is a bug
UNINSTALLED = {"tier1", "tier2", "cache", "api", "jobs"}


def unit_of(module: str) -> str:
    prefix = max(
        (p for p in UNITS if module == p or module.startswith(p + ".")), key=len, default=""
    )
    return UNITS[prefix] if prefix else ""


def module_of(path: Path) -> str:
    relative = path.relative_to(ROOT)
    package = next(p for p, folder in FOLDERS.items() if relative.parts[0] == folder)
    parts = relative.with_suffix("").parts[1:]
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join((package, *parts))


def project_imports(tree: ast.Module, module: str) -> Iterator[tuple[str, ast.stmt, bool]]:
    """(imported module, statement, at module level) for every import in the file."""
    top_level = {id(node) for node in tree.body}
    top_level |= {
        id(child)
        for node in tree.body
        if isinstance(node, ast.If)  # `if TYPE_CHECKING:` blocks count as module level
        for child in node.body
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node, id(node) in top_level
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.level:
                base = module.rsplit(".", node.level)[0]
                yield f"{base}.{node.module}", node, id(node) in top_level
            else:
                yield node.module, node, id(node) in top_level
                if node.module == "segmentstore":  # `from segmentstore import tier2`
                    for alias in node.names:
                        yield f"segmentstore.{alias.name}", node, id(node) in top_level


SOURCES = sorted(p for folder in FOLDERS.values() for p in (ROOT / folder).rglob("*.py"))


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
