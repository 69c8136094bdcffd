"""Latency statistics and the printed table shared by the benchmarks."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


def run_loop(main: Coroutine[Any, Any, T], loop: str) -> T:
    """Run ``main`` on ``uvloop`` (what the service runs on) or the standard ``asyncio`` loop."""
    if loop == "uvloop":
        import uvloop

        return uvloop.run(main)
    return asyncio.run(main)


def percentile(sorted_values: list[float], fraction: float) -> float:
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, int(fraction * len(sorted_values)))
    return sorted_values[index]


def print_table(rows: list[dict[str, Any]], columns: list[tuple[str, str, str]]) -> None:
    """``columns`` are (key, heading, format spec)."""
    lines = [[format(row[k], spec) for k, _, spec in columns] for row in rows]
    widths = [
        max(len(h), 10, *(len(cells[i]) for cells in lines)) for i, (_, h, _) in enumerate(columns)
    ]
    print("  ".join(h.rjust(w) for (_, h, _), w in zip(columns, widths, strict=True)))
    for cells in lines:
        print("  ".join(c.rjust(w) for c, w in zip(cells, widths, strict=True)))


def write_json(path: str | None, name: str, rows: list[dict[str, Any]]) -> None:
    if path:
        Path(path).write_text(json.dumps({"benchmark": name, "results": rows}, indent=2) + "\n")
        print(f"wrote {path}")
