"""The fenced code blocks of a Markdown page, with the ``<!-- docs-test: KIND ... -->`` marker
line right before each (None when there is none), for the tests that run the docs."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

_FENCE = re.compile(r"^```(\w*)\s*$")
_MARKER = re.compile(r"^<!--\s*docs-test:\s*([\w-]+)")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence, from 1
    language: str
    text: str
    marker: str | None

    def __str__(self) -> str:
        return f"{self.path.name}:{self.line} ({self.language})"


def blocks(path: Path) -> list[Block]:
    lines = path.read_text().splitlines()
    found = []
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        end = next(i for i in range(index + 1, len(lines)) if lines[i].startswith("```"))
        before = _MARKER.match(lines[index - 1]) if index else None
        text = "\n".join(lines[index + 1 : end]) + "\n"
        found.append(
            Block(path, index + 1, opening.group(1), text, before.group(1) if before else None)
        )
        index = end + 1
    return found
