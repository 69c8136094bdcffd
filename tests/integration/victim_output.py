"""What the SIGKILL tests read from the process they kill: its acknowledgements, line by line."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import IO


@dataclass(frozen=True, slots=True)
class Ack:
    """One acknowledged append, as the victim printed it."""

    segment: str
    offset: int
    length_after: int
    writer: str
    seq: int


class VictimOutput:
    """Reads the victim's stdout in a thread, so the pipe never fills; each line carries the
    time it arrived (to tell whether acks were still flowing when the kill came)."""

    def __init__(self, stream: IO[bytes], name: str) -> None:
        self._stream = stream
        self.lines: list[tuple[float, str]] = []
        self.torn_tail: bytes | None = None
        self.ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"{name}-stdout", daemon=True)
        self._thread.start()

    @property
    def texts(self) -> list[str]:
        return [line for _, line in self.lines]

    def _run(self) -> None:
        for raw in self._stream:
            if not raw.endswith(b"\n"):
                self.torn_tail = raw  # cannot happen with one write(2) per line; checked
                break
            line = raw.decode("ascii").rstrip("\n")
            self.lines.append((time.monotonic(), line))
            if line == "READY":
                self.ready.set()
        self.ready.set()  # EOF: wake the waiter, who then sees the child is gone

    def join(self, timeout: float) -> bool:
        """Wait for EOF; whether it came."""
        self._thread.join(timeout)
        return not self._thread.is_alive()
