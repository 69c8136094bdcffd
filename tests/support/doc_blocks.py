"""The code blocks of the project's Markdown pages, for the tests that run the docs as written.

Convention, for README.md, docs/*.md and helm/segmentstore/README.md:

- Every fenced block whose info string is ``sh``, ``bash`` or ``python`` is an example a user
  will paste, and tests/test_docs.py runs it exactly as written. A page is one script: its
  blocks run in order in one shell, from a fresh directory outside the clone, so a block may use
  what an earlier block of the page started or set (a node in the background, ``$S``). Python
  blocks run with the ``python3`` on PATH. Commands come from PATH (the project's virtual
  environment's ``bin`` first, nothing else activated), and a page stops what it starts.
- Other fences (``json``, ``mermaid``, a bare fence for a layout or a format) are not code.
- A block that cannot run here is marked by an HTML comment on the line right before its fence:

  ``<!-- docs-test: syntax-only (REASON) -->``
      checked for syntax only (``bash -n``, ``compile()``); REASON says what it needs that a
      test cannot have here: a Kubernetes cluster, a remote host, minutes of running, or the
      clone itself (``make test``).
  ``<!-- docs-test: spark -->``
      run by the Spark docs test, which has a Spark session; the other docs test checks its
      syntax only.

  Any other ``docs-test`` comment is an error, so a misspelt marker cannot silently skip a block.

:func:`blocks` reads one page; :func:`pages` lists the pages a clone holds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

RUNNABLE = {"sh": "sh", "bash": "sh", "python": "python"}
MARKERS = ("syntax-only", "spark")

_FENCE = re.compile(r"^(?P<indent>\s*)```(?P<info>[\w+-]*)\s*$")
_MARKER = re.compile(
    r"^\s*<!--\s*docs-test:\s*(?P<kind>[\w-]+)\s*(?:\((?P<reason>.*)\))?\s*-->\s*$"
)
_ANY_MARKER = re.compile(r"<!--\s*docs-test\b")


@dataclass(frozen=True)
class Block:
    """One runnable block: ``lang`` is ``"sh"`` or ``"python"``; ``line`` is the 1-based line
    of its opening fence; ``marker`` is ``None`` (run it), ``"syntax-only"`` or ``"spark"``."""

    path: Path
    line: int
    lang: str
    text: str
    marker: str | None = None
    reason: str = ""

    @property
    def where(self) -> str:
        try:
            name = self.path.relative_to(REPO)
        except ValueError:
            name = self.path
        return f"{name}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """The ``sh``/``bash``/``python`` blocks of the page at ``path``, in order."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        fence = _FENCE.match(lines[index])
        if fence is None:
            if _ANY_MARKER.search(lines[index]) and not _is_marker_before_fence(lines, index):
                raise ValueError(
                    f"{path}:{index + 1}: a docs-test marker must be right before a fence"
                )
            index += 1
            continue
        indent, info = fence["indent"], fence["info"]
        end = index + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        if end == len(lines):
            raise ValueError(f"{path}:{index + 1}: a fence that never closes")
        if info in RUNNABLE:
            body = [_dedent(line, indent) for line in lines[index + 1 : end]]
            marker, reason = _marker(path, lines, index)
            found.append(
                Block(path, index + 1, RUNNABLE[info], "\n".join(body) + "\n", marker, reason)
            )
        index = end + 1
    return found


def pages(root: Path = REPO) -> list[Path]:
    """Every page whose blocks the docs tests run: the README, docs/*.md, the chart's README."""
    return [
        root / "README.md",
        *sorted((root / "docs").glob("*.md")),
        root / "helm" / "segmentstore" / "README.md",
    ]


def _is_marker_before_fence(lines: list[str], index: int) -> bool:
    return index + 1 < len(lines) and _FENCE.match(lines[index + 1]) is not None


def _marker(path: Path, lines: list[str], fence_index: int) -> tuple[str | None, str]:
    if fence_index == 0:
        return None, ""
    previous = lines[fence_index - 1]
    if not _ANY_MARKER.search(previous):
        return None, ""
    match = _MARKER.match(previous)
    if match is None or match["kind"] not in MARKERS:
        raise ValueError(f"{path}:{fence_index}: unknown docs-test marker {previous.strip()!r}")
    kind, reason = match["kind"], (match["reason"] or "").strip()
    if kind == "syntax-only" and not reason:
        raise ValueError(f"{path}:{fence_index}: a syntax-only block must say why, in brackets")
    return kind, reason


def _dedent(line: str, indent: str) -> str:
    return line[len(indent) :] if line.startswith(indent) else line.lstrip()
