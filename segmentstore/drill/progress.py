"""The drill's live progress: a rich progress bar on a terminal, plain lines otherwise (one per
event, and one every five seconds), so a log or CI keeps a readable record."""

from __future__ import annotations

import sys
from types import TracebackType
from typing import TextIO

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from segmentstore.drill.report import DrillReport

_PLAIN_EVERY_S = 5.0


def _counters(report: DrillReport) -> str:
    return (
        f"acked {report.acknowledged} ({report.acknowledged_bytes >> 10} KiB), "
        f"faults {len(report.faults)}, lost {report.lost}, torn {report.torn}"
    )


class DrillProgress:
    def __init__(self, duration_s: float, stream: TextIO | None = None) -> None:
        self._stream = stream or sys.stdout
        self._duration_s = duration_s
        self._last_plain = -_PLAIN_EVERY_S
        self._bar: Progress | None = None
        self._task: TaskID | None = None
        if self._stream.isatty():
            self._bar = Progress(
                TextColumn("[bold]drill"),
                BarColumn(),
                TimeElapsedColumn(),
                TextColumn("{task.description}"),
                console=Console(file=self._stream),
            )

    def __enter__(self) -> DrillProgress:
        if self._bar is not None:
            self._bar.start()
            self._task = self._bar.add_task("starting", total=self._duration_s)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._bar is not None:
            self._bar.stop()

    def __call__(self, event: str, report: DrillReport, elapsed_s: float) -> None:
        if self._bar is not None and self._task is not None:
            self._bar.update(
                self._task,
                completed=min(elapsed_s, self._duration_s),
                description=_counters(report),
            )
            if event:
                self._bar.console.print(f"{elapsed_s:7.1f} s  {event}")
            return
        if event or elapsed_s - self._last_plain >= _PLAIN_EVERY_S:
            self._last_plain = elapsed_s
            what = f"  {event}" if event else ""
            print(
                f"drill {elapsed_s:7.1f} s  {_counters(report)}{what}",
                file=self._stream,
                flush=True,
            )
