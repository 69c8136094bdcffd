"""``LazyMount``: a lazyfs mount run by a server process of its own, as its parent sees it.

The server (``python -m segmentstore.drill.lazyfs``) is a child process that talks to its
parent over its standard input and output. However the parent ends, the mount goes: on
:meth:`LazyMount.unmount` (or leaving the ``with`` block) the server detaches it; if the parent
dies, the server sees its standard input close and detaches it; if the server dies, the parent
detaches it lazily (``umount -l``) on unmount, and the next mount anywhere detaches the mounts
of dead servers (:func:`kernel.detach_orphans`).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

from segmentstore.drill.lazyfs.kernel import FuseUnavailable, detach, detach_orphans


class LazyMount:
    def __init__(
        self,
        backing: Path,
        mountpoint: Path,
        *,
        model: str = "strict",
        fsync_ms: float = 2.0,
        log: Path | None = None,
    ) -> None:
        self.backing = backing
        self.mountpoint = mountpoint
        self.model = model
        self.fsync_ms = fsync_ms
        self.log = log
        self.losses = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._pending = b""

    def mount(self, timeout_s: float = 30) -> None:
        detach_orphans()
        self.backing.mkdir(parents=True, exist_ok=True)
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        log: IO[bytes] | int = subprocess.DEVNULL
        with contextlib.ExitStack() as stack:
            if self.log is not None:
                log = stack.enter_context(open(self.log, "ab"))
            self._proc = subprocess.Popen(
                [
                    sys.executable, "-m", "segmentstore.drill.lazyfs",
                    str(self.backing), str(self.mountpoint), "--model", self.model,
                    "--fsync-ms", str(self.fsync_ms),
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
            )  # fmt: skip
        answer = self._answer(timeout_s)
        if "error" in answer:
            self._proc.wait(timeout=10)
            raise FuseUnavailable(answer["error"])
        # The first request on a new mount is the kernel's INIT: wait until it was answered.
        os.statvfs(self.mountpoint)

    def set_read_only(self, on: bool) -> None:
        """From now on (``on``) every request that would change the mount fails with
        ``EROFS``, whatever files are open (the disk beneath is read-only, as in an outage);
        or it is writable again."""
        self._ask({"op": "read_only", "on": on}, 30)

    def hold_syncs(self) -> None:
        """From now until the power loss, no ``fsync`` on the mount completes."""
        self._ask({"op": "hold_syncs"}, 30)

    def lose_power(self, seed: int, keep: str = "random", timeout_s: float = 120) -> dict[str, Any]:
        """Everything un-synced is kept or dropped (``keep``: ``random`` from ``seed``, or
        ``none``, or ``all``); the mount then shows what survived. Kill the processes that
        use the mount first (their requests under way then fail, so they can die); start
        them again once they are gone."""
        report = self._ask({"op": "lose_power", "seed": seed, "keep": keep}, timeout_s)
        self.losses += 1
        return report

    def status(self) -> dict[str, Any]:
        return self._ask({"op": "status"}, 30)

    def unmount(self, timeout_s: float = 30) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            if proc.poll() is None:
                assert proc.stdin is not None
                with contextlib.suppress(OSError):
                    proc.stdin.write(b'{"op": "unmount"}\n')
                    proc.stdin.flush()
                    proc.stdin.close()
                try:
                    proc.wait(timeout=timeout_s)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        finally:
            detach(self.mountpoint)  # nothing if the server did it; else its mount is dead
            for pipe in (proc.stdin, proc.stdout):
                if pipe is not None:
                    with contextlib.suppress(OSError):
                        pipe.close()

    def __enter__(self) -> LazyMount:
        self.mount()
        return self

    def __exit__(self, *exc: object) -> None:
        self.unmount()

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def _ask(self, command: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        proc = self._proc
        if proc is None or proc.poll() is not None:
            raise RuntimeError(f"the lazyfs server of {self.mountpoint} is not running")
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(command).encode() + b"\n")
        proc.stdin.flush()
        answer = self._answer(timeout_s)
        if "error" in answer:
            raise RuntimeError(f"lazyfs at {self.mountpoint}: {answer['error']}")
        return answer

    def _answer(self, timeout_s: float) -> dict[str, Any]:
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        fd = proc.stdout.fileno()
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._pending:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise RuntimeError(f"the lazyfs server of {self.mountpoint} did not answer")
            chunk = os.read(fd, 65536)
            if not chunk:
                code = proc.wait(timeout=10)
                raise RuntimeError(
                    f"the lazyfs server of {self.mountpoint} exited ({code}){self._log_tail()}"
                )
            self._pending += chunk
        line, self._pending = self._pending.split(b"\n", 1)
        answer: dict[str, Any] = json.loads(line)
        return answer

    def _log_tail(self) -> str:
        if self.log is None:
            return ""
        try:
            return ":\n" + self.log.read_text(errors="replace")[-3000:]
        except OSError:
            return ""
