"""Fixtures for Tier 1 tests: the harness of each ``DurableDataLog`` implementation, so that the
contract suite runs against each of them, and a check that no exception goes unretrieved."""

from __future__ import annotations

import asyncio
import itertools
import os
import resource
import signal
from collections.abc import AsyncIterator, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, TypeVar

import nats
import pytest
from fault_injection import FaultInjector
from flaky_tier1 import FlakyDataLog
from loop_checks import every_exception_retrieved
from memory_tier1 import InMemoryDataLog, InMemoryTier1
from nats.js.errors import NotFoundError

from segmentstore.harness.jetstream_cluster import JetStreamCluster
from segmentstore.tier1 import DurableDataLog, LocalDurableDataLog
from segmentstore.tier1.jetstream import JetStreamDurableDataLog, JetStreamOptions

from .local_log_helpers import use_thread_syncs

T = TypeVar("T")
_PREFIXES = itertools.count()


@pytest.fixture(autouse=True)
async def _every_exception_retrieved() -> AsyncIterator[None]:
    async with every_exception_retrieved():
        yield


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


class JetStreamHarness(LogHarness):
    """A fresh stream (a prefix of its own) on the session's three-node JetStream cluster."""

    name = "jetstream"

    def __init__(self, cluster: JetStreamCluster) -> None:
        self.options = JetStreamOptions(
            servers=tuple(cluster.servers),
            stream_prefix=f"t{next(_PREFIXES)}",
            ack_timeout_ms=2_000,
            write_timeout_ms=10_000,
            # Records of the contract suite above this span several messages (multi-part).
            max_message_bytes=256 * 1024,
        )

    def new_log(self) -> DurableDataLog:
        return JetStreamDurableDataLog(self.options, container=0)

    @contextmanager
    def failing_writes(self) -> Iterator[None]:
        """The stream refuses every new message, as a full medium would: its byte limit is set
        to what it holds (with discard "new"), then lifted."""
        stream = self.options.stream(0)
        held = _in_a_thread(_stream_bytes(self.options.servers, stream))
        _in_a_thread(_limit_stream(self.options.servers, stream, held))
        try:
            yield
        finally:
            _in_a_thread(_limit_stream(self.options.servers, stream, -1))

    async def remove(self) -> None:
        client = await nats.connect(list(self.options.servers))
        try:
            js = client.jetstream()
            for name in (self.options.stream(0), f"KV_{self.options.epoch_bucket}"):
                with suppress(NotFoundError):
                    await js.delete_stream(name)
        finally:
            await client.close()


def _in_a_thread(work: Coroutine[Any, Any, T]) -> T:
    """Run ``work`` to the end on a loop of its own (for a synchronous context manager called
    from a test's running loop)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, work).result()


async def _stream_bytes(servers: tuple[str, ...], stream: str) -> int:
    client = await nats.connect(list(servers))
    try:
        return (await client.jetstream().stream_info(stream)).state.bytes
    finally:
        await client.close()


async def _limit_stream(servers: tuple[str, ...], stream: str, max_bytes: int) -> None:
    client = await nats.connect(list(servers))
    try:
        js = client.jetstream()
        config = (await js.stream_info(stream)).config
        config.max_bytes = max_bytes
        await js.update_stream(config)
    finally:
        await client.close()


class MemoryHarness(LogHarness):
    """The in-memory double of tests/support, held to the same contract; with ``flaky``, inside
    the fault-injecting wrapper with no fault set, which must change nothing."""

    def __init__(self, flaky: bool = False) -> None:
        self.name = "flaky-memory" if flaky else "memory"
        self.medium = InMemoryTier1()
        self.flaky = flaky

    def new_log(self) -> DurableDataLog:
        log = InMemoryDataLog(self.medium)
        return FlakyDataLog(log, FaultInjector()) if self.flaky else log

    @contextmanager
    def failing_writes(self) -> Iterator[None]:
        self.medium.refuse_writes = True
        try:
            yield
        finally:
            self.medium.refuse_writes = False


# Another implementation joins the contract suite by adding its harness here. The local log
# runs twice: with its syncs through an io_uring, and with the thread that runs
# them where that is not available.
HARNESSES = ("jetstream", "local", "local-thread-syncs", "memory", "flaky-memory")


@pytest.fixture(params=HARNESSES)
async def harness(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[LogHarness]:
    if request.param in ("local", "local-thread-syncs"):
        if request.param == "local-thread-syncs":
            use_thread_syncs(request.getfixturevalue("monkeypatch"))
        yield LocalHarness(tmp_path)
        return
    if request.param in ("memory", "flaky-memory"):
        yield MemoryHarness(flaky=request.param == "flaky-memory")
        return
    jetstream = JetStreamHarness(request.getfixturevalue("jetstream_cluster"))
    yield jetstream
    await jetstream.remove()


@pytest.fixture
def local_harness(tmp_path: Path) -> LocalHarness:
    return LocalHarness(tmp_path)
