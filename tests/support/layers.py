"""The layers of the project: which unit each module belongs to, and what each unit may import
(docs/architecture.md). tests/test_layering.py holds every import to this table, and
tests/test_docs_code.py holds each package's docstring to it.

Every folder installs under one package, ``segmentstore`` (setup.py): ``tier1/`` is
``segmentstore.tier1`` and so on. A module belongs to the *unit* of the longest prefix below
that its installed name starts with; a unit may import only the units it is allowed.
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
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
    "segmentstore.workers": "workers",
    "segmentstore.store": "store",
    "segmentstore.config": "config",
    "segmentstore.api": "api",
    "segmentstore.jobs": "jobs",
    "segmentstore.client": "client",
    "segmentstore.bench": "bench",
    "segmentstore.harness": "harness",
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
    # the settings tree takes the JetStream log's options and the local log's defaults as
    # tier1 defines them, instead of a copy
    "vocabulary": {*SHARED, "tier1"},
    "metadata": {"vocabulary", *SHARED, "tier2"},
    "logs": {"vocabulary", *SHARED, "metadata", "tier1"},
    "reading": {"vocabulary", *SHARED, "metadata", "logs", "tier2", "cache"},
    "writer": {"vocabulary", *SHARED, "metadata", "logs", "tier2"},
    "containers": {"vocabulary", *SHARED, *CORE - {"store"}, *STORAGE},
    "store": {"vocabulary", *SHARED, *CORE, *STORAGE},
    "config": {"vocabulary", *SHARED},
    # a cluster node's membership: the store's containers and the leases beside Tier 1
    "cluster": {"vocabulary", *SHARED, "store", "containers", "tier1"},
    # a node's workers: the supervisor, their shares and board, and the ownership of a single
    # node's containers by its workers, which routing asks as it asks a cluster's membership
    "workers": {"vocabulary", *SHARED, "store", "containers", "cluster"},
    "api": {"vocabulary", *SHARED, "store", "containers", "cluster", "workers"},
    "jobs": {"tier2"},
    # the client speaks the contract and nothing else of the server: a client-only install
    # has no server code (test_client_package proves no backend loads)
    "client": SHARED,
    # every benchmark, the API's and the Spark jobs' too (against their bare baselines: the
    # API's are apps of the API itself, pyarrow reads the chunks Spark reads)
    "bench": {
        "vocabulary",
        *SHARED,
        "store",
        "containers",
        "client",
        "tier2",
        "harness",
        "api",
        "jobs",
    },
    # the processes the benchmarks, the drill and the tests start on loopback
    "harness": {"vocabulary", *SHARED},
    # the drill speaks to a deployment over HTTP only: it knows the store by its contract;
    # what it spawns are the harness's processes (JetStream servers, store nodes, moto)
    "drill": {"vocabulary", *SHARED, "harness", "lazyfs"},
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
        "workers",
    },
}
PACKAGE_SURFACE = {"vocabulary", *SHARED, "store"}  # what segmentstore/__init__ re-exports
# the composition root imports these only inside functions, so that `segmentstore tier2 cat`
# never loads FastAPI or Spark
LAZY_FOR_CLI = {"api", "jobs", "bench", "store", "drill", "cluster", "workers"}
# third-party package -> the only units that may import it
FRAMEWORKS = {
    # the HTTP framework and server are the API's alone, its benchmarks' baseline apps included
    "fastapi": {"api"},
    "uvicorn": {"api"},
    "starlette": {"api"},
    "pyspark": {"jobs"},
    "pyarrow": {"tier1", "tier2", "jobs", "bench"},
    "boto3": {"tier1", "tier2"},
    "botocore": {"tier1", "tier2"},
    "lmdb": {"cache"},
    # cluster: its leases in a JetStream key-value bucket; harness: the loopback JetStream
    # cluster it starts
    "nats": {"tier1", "cluster", "harness"},
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
