"""What a long Spark job shows while it runs: its phases with their timings, and the progress
of every running stage (tasks done, running, failed), polled from Spark's status tracker."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from pyspark.sql import SparkSession

POLL_S = 1.0


class Progress:
    """``with progress.phase("scan"):`` prints the phase, the stages' progress while it runs,
    and how long it took."""

    def __init__(self, spark: SparkSession, out: TextIO | None = None, prefix: str = "") -> None:
        self._tracker = spark.sparkContext.statusTracker()
        self._out = out or sys.stderr
        self._prefix = prefix
        self.timings: dict[str, float] = {}

    def say(self, text: str) -> None:
        print(f"{self._prefix}{text}", file=self._out, flush=True)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        self.say(f"{name} ...")
        stop = threading.Event()
        watcher = threading.Thread(target=self._watch, args=(stop,), name="progress", daemon=True)
        begun = time.perf_counter()
        watcher.start()
        try:
            yield
        finally:
            stop.set()
            watcher.join()
            elapsed = self.timings[name] = time.perf_counter() - begun
        self.say(f"{name}: done in {elapsed:.1f} s")

    def _watch(self, stop: threading.Event) -> None:
        shown: dict[int, tuple[int, int, int]] = {}
        while not stop.wait(POLL_S):
            for stage in self._tracker.getActiveStageIds():
                info = self._tracker.getStageInfo(stage)
                if info is None:
                    continue
                state = (info.numCompletedTasks, info.numActiveTasks, info.numFailedTasks)
                if shown.get(stage) != state:
                    shown[stage] = state
                    failed = f", {info.numFailedTasks} failed" if info.numFailedTasks else ""
                    self.say(
                        f"  stage {stage} ({info.name.split(' at ')[0]}): "
                        f"{info.numCompletedTasks}/{info.numTasks} tasks done, "
                        f"{info.numActiveTasks} running{failed}"
                    )
