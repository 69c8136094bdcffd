"""The docs name the code as it is.

- Paths in README.md, docs/*.md and the chart's README are repository paths (``api/gate.py``,
  ``segmentstore/containers/container.py``), never paths inside the installed package
  (``containers/container.py``), and every one of them exists.
- Each package's docstring says what it may import in one sentence, ``May import: ``a``,
  ``b``.`` (or ``May import: nothing of the project.``; what follows ``; never`` it may not),
  which is the layering test's table of what its unit may import; and every module a package
  docstring names exists.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

import pytest
from doc_blocks import pages
from layers import ALLOWED, FOLDERS, ROOT, module_of, unit_of

_TOKEN = re.compile(r"`([^`\s]+)`")
_FILE = re.compile(r"[\w.-]+\.(py|md|toml|yaml|yml|json|js|css|html|lua|txt)")


def _paths(text: str) -> list[str]:
    """Backticked tokens that name a file of the repository (``api/gate.py``; a bare
    ``gate.py`` too, which must be written as a path)."""
    found = []
    for token in _TOKEN.findall(text):
        token = token.rstrip(",.:;")
        if "://" in token or token.startswith(("-", "/", "~", "$", ".")) or "<" in token:
            continue
        if _FILE.fullmatch(token.split("/")[-1]) and ("/" in token or token.endswith(".py")):
            found.append(token)
    return found


def _base(page: Path) -> Path:
    """Where a page's paths start: the repository, but for the chart's README, which is
    published with the chart and names the chart's own files."""
    chart = ROOT / "helm" / "segmentstore"
    return chart if page.parent == chart else ROOT


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_path_in_the_docs_is_a_repository_path_that_exists(page: Path) -> None:
    base = _base(page)
    missing = [p for p in _paths(page.read_text()) if not (base / p.split("#")[0]).exists()]
    assert not missing, f"{page.relative_to(ROOT)}: not repository paths: {missing}"


def _packages() -> list[Path]:
    return sorted(p for folder in FOLDERS.values() for p in (ROOT / folder).rglob("__init__.py"))


def _may_import(doc: str) -> set[str] | None:
    sentence = re.search(r"May import: (.*?)\.(\s|$)", doc, re.DOTALL)
    if sentence is None:
        return None
    allowed = sentence.group(1).split("; never")[0]  # what follows "never" it may not import
    if allowed.strip() == "nothing of the project":
        return set()
    return set(re.findall(r"``([a-z0-9_]+)``", allowed))


@pytest.mark.parametrize("package", _packages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_each_package_says_what_it_may_import_as_the_layering_test_allows(package: Path) -> None:
    module = module_of(package)
    doc = ast.get_docstring(ast.parse(package.read_text())) or ""
    unit = unit_of(module)
    parent = unit_of(module.rsplit(".", 1)[0]) if "." in module else None
    if unit == parent and _may_import(doc) is None:
        return  # a folder inside its unit: the unit's package says it
    stated = _may_import(doc)
    assert stated is not None, f"{module}: no 'May import: ...' sentence"
    allowed = ALLOWED[unit] - {unit}  # a unit imports itself: no need to say so
    assert stated == allowed, (module, sorted(stated), sorted(allowed))


@pytest.mark.parametrize("package", _packages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_module_a_package_docstring_names_exists(package: Path) -> None:
    module = module_of(package)
    doc = ast.get_docstring(ast.parse(package.read_text())) or ""
    missing = []
    for name in re.findall(r":mod:`~?([\w.]+)`", doc):
        full = f"{module}{name}" if name.startswith(".") else name
        if importlib.util.find_spec(full) is None:
            missing.append(name)
    assert not missing, f"{module} names modules that do not exist: {missing}"
