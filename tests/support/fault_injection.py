"""Pravega's ``ErrorInjector`` idea: decide, call by call, which calls of a wrapped component
fail, wait or corrupt, from rules and a seed, so a failure is put exactly where a test wants it
(the 5th append, every read from the 3rd on, one in ten chunk writes) and a run repeats.

A wrapper (flaky_tier1.FlakyDataLog, flaky_tier2.FlakyChunkStorage) asks :meth:`decide` on
every call of a method and does what the returned :class:`Fault` says around the real call:

``fail``
    the call fails before it reaches the real component (nothing is written);
``fail_after``
    the real call happens, then the caller is told it failed (a lost acknowledgement);
``partial``
    a write reaches the real component cut short, then fails (a crash midway);
``delay``
    the call waits ``delay_s`` first;
``corrupt``
    what the call returns (or writes) has a byte changed.

Each call of a method is numbered from 1 per method; a rule picks calls by number (``nth``,
``from_nth``, ``every``) and, with ``probability``, by a draw from the seed. Every fault
injected is recorded in :attr:`FaultInjector.injected`, so a test can assert that its fault
really happened.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

Action = Literal["fail", "fail_after", "partial", "delay", "corrupt"]


@dataclass(frozen=True)
class Fault:
    method: str
    action: Action
    error: Callable[[], BaseException] | None = None
    delay_s: float = 0.0
    nth: int | None = None
    from_nth: int | None = None
    every: int | None = None
    probability: float = 1.0

    def picks(self, call: int) -> bool:
        if self.nth is not None and call != self.nth:
            return False
        if self.from_nth is not None and call < self.from_nth:
            return False
        return self.every is None or call % self.every == 0


class FaultInjector:
    def __init__(self, seed: int = 0) -> None:
        self._random = random.Random(seed)
        self._faults: list[Fault] = []
        self._lock = threading.Lock()  # chunk storage calls come from worker threads
        self.calls: Counter[str] = Counter()
        self.injected: list[tuple[str, int, Action]] = []

    def add(self, method: str, action: Action, **rule: object) -> Fault:
        """Inject ``action`` into the calls of ``method`` that the rule picks (Fault's fields:
        ``error``, ``delay_s``, ``nth``, ``from_nth``, ``every``, ``probability``)."""
        fault = Fault(method, action, **rule)  # type: ignore[arg-type]
        with self._lock:
            self._faults.append(fault)
        return fault

    def remove(self, fault: Fault | None = None) -> None:
        """Stop injecting ``fault`` (every fault if ``None``): the component heals."""
        with self._lock:
            self._faults = [] if fault is None else [f for f in self._faults if f is not fault]

    def decide(self, method: str) -> Fault | None:
        """Count a call of ``method``; the fault to inject into it, if any."""
        with self._lock:
            self.calls[method] += 1
            call = self.calls[method]
            for fault in self._faults:
                if fault.method != method or not fault.picks(call):
                    continue
                if fault.probability < 1.0 and self._random.random() >= fault.probability:
                    continue
                self.injected.append((method, call, fault.action))
                return fault
            return None

    def count(self, method: str, action: Action | None = None) -> int:
        """How many faults were injected into ``method`` (of ``action``, if given)."""
        return sum(1 for m, _, a in self.injected if m == method and action in (None, a))


def corrupted(data: bytes, at: int = 0) -> bytes:
    """``data`` with the byte at ``at`` changed (a flipped bit would pass some checks by luck;
    every bit of the byte is flipped)."""
    if not data:
        return data
    at %= len(data)
    return data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1 :]
