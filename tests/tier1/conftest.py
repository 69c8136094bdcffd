"""Fixtures for Tier 1 tests: the harness of each ``DurableDataLog`` implementation, so that the
contract suite runs against each of them, and a check that no exception goes unretrieved."""

from __future__ import annotations

import asyncio
import gc
import os
import resource
import signal
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from segmentstore.tier1 import DurableDataLog, LocalDurableDataLog


@pytest.fixture(autouse=True)
async def _every_exception_retrieved() -> AsyncIterator[None]:
    """Fail a test that leaves an exception nobody retrieved ("Future exception was never
    retrieved"): the loop reports those to its handler, not as warnings, so failure paths must
    consume the futures they fail."""
    loop = asyncio.get_running_loop()
    unretrieved: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _, context: unretrieved.append(context))
    yield
    gc.collect()  # futures that died in reference cycles report now
    loop.set_exception_handler(previous)
    assert not unretrieved, [context.get("message") for context in unretrieved]


class LogHarness:
    """One implementation under test, bound to one fresh medium."""

    name: str

    def new_log(self) -> DurableDataLog:
        """A new, unopened instance on this harness's medium (the same one every call)."""
        raise NotImplementedError

    @contextmanager
    def failing_writes(self) -> Iterator[None]:
        """While inside, the medium refuses every write of the log's current piece."""
        raise NotImplementedError
        yield


class LocalHarness(LogHarness):
    name = "local"
    # Small enough that the contract tests roll files too.
    segment_bytes = 1024 * 1024

    def __init__(self, root: Path) -> None:
        self.directory = root / "log"

    def new_log(self) -> DurableDataLog:
        return LocalDurableDataLog(self.directory, segment_bytes=self.segment_bytes)

    @contextmanager
    def failing_writes(self) -> Iterator[None]:
        """A real OS error, EFBIG, through RLIMIT_FSIZE lowered to the last file's size.

        Making the directory read-only proves nothing as root, and a full file system is not
        available here. The limit holds for the whole test process, so the window is kept to
        the appends that must fail; SIGXFSZ is ignored so that the kernel returns EFBIG instead
        of killing the process. Needs a non-empty last file and no roll inside the window.
        """
        last = max(self.directory.glob("*.log"))
        limit = os.path.getsize(last)
        assert limit > 0, "append something before breaking the medium"
        soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
        try:
            yield
        finally:
            resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
            signal.signal(signal.SIGXFSZ, previous)


# Another implementation joins the contract suite by adding its harness here.
HARNESSES: dict[str, Callable[[Path], LogHarness]] = {"local": LocalHarness}


@pytest.fixture(params=sorted(HARNESSES))
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> LogHarness:
    return HARNESSES[request.param](tmp_path)


@pytest.fixture
def local_harness(tmp_path: Path) -> LocalHarness:
    return LocalHarness(tmp_path)
