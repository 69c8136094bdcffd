"""The local log's syncs off the event loop: an io_uring of its own, or a thread where that is
refused. Both report each sync once, on the loop, with the kernel's answer."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from segmentstore.tier1.local.sync_requests import RingSyncs, SyncRequests, ThreadSyncs

from .local_log_helpers import run_python

Build = Callable[[asyncio.AbstractEventLoop, Callable[[int], None]], SyncRequests]
BACKENDS: dict[str, Build] = {"ring": RingSyncs, "thread": ThreadSyncs}


class Answers:
    """What ``done`` was called with, and on which thread."""

    def __init__(self) -> None:
        self.codes: list[int] = []
        self.threads: set[int] = set()
        self.arrived = asyncio.Event()

    def __call__(self, code: int) -> None:
        self.codes.append(code)
        self.threads.add(threading.get_ident())
        self.arrived.set()

    async def next(self) -> int:
        await asyncio.wait_for(self.arrived.wait(), 10)
        self.arrived.clear()
        return self.codes[-1]


@pytest.fixture
def data_file(tmp_path: Path) -> Iterator[int]:
    fd = os.open(tmp_path / "data", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    yield fd
    os.close(fd)


@pytest.mark.parametrize("backend", BACKENDS)
async def test_each_sync_is_answered_once_on_the_loop(backend: str, data_file: int) -> None:
    answers = Answers()
    syncs = BACKENDS[backend](asyncio.get_running_loop(), answers)
    try:
        for i in range(20):
            os.write(data_file, bytes([i]) * 1000)
            syncs.submit(data_file)
            assert await answers.next() == 0
        await asyncio.sleep(0.05)  # nothing more arrives
        assert answers.codes == [0] * 20
        assert answers.threads == {threading.get_ident()}
    finally:
        syncs.close()


@pytest.mark.parametrize("backend", BACKENDS)
async def test_the_kernels_refusal_is_the_answer(
    backend: str, data_file: int, tmp_path: Path
) -> None:
    answers = Answers()
    syncs = BACKENDS[backend](asyncio.get_running_loop(), answers)
    closed = os.open(tmp_path / "closed", os.O_WRONLY | os.O_CREAT)
    os.close(closed)
    try:
        syncs.submit(closed)
        assert await answers.next() == errno.EBADF
        syncs.submit(data_file)  # one refusal does not break the next request
        assert await answers.next() == 0
    finally:
        syncs.close()


# A process that may open no more files cannot have a ring (it needs descriptors): the kernel
# refuses, and the log syncs through a thread instead.
_NO_DESCRIPTORS_LEFT = """
import asyncio, os, resource, sys
from segmentstore.tier1.local.sync_requests import ThreadSyncs, open_sync_requests

async def main():
    fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    answered = asyncio.get_running_loop().create_future()
    highest = max(int(n) for n in os.listdir("/proc/self/fd"))
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (highest + 1, hard))
    syncs = open_sync_requests(asyncio.get_running_loop(), answered.set_result)
    os.write(fd, b"synced through " + type(syncs).__name__.encode())
    syncs.submit(fd)
    print(type(syncs).__name__, await answered)
    syncs.close()

asyncio.run(main())
"""


def test_a_process_refused_a_ring_syncs_through_a_thread(tmp_path: Path) -> None:
    done = run_python(_NO_DESCRIPTORS_LEFT, str(tmp_path / "data"))
    assert done.stdout.split() == ["ThreadSyncs", "0"], done.stderr
    assert (tmp_path / "data").read_bytes() == b"synced through ThreadSyncs"


async def test_closing_from_another_thread_waits_for_the_sync_under_way(data_file: int) -> None:
    answers = Answers()
    loop = asyncio.get_running_loop()
    rings_before = _open_rings()
    syncs = RingSyncs(loop, answers)
    assert _open_rings() > rings_before
    os.write(data_file, b"x" * 100_000)
    syncs.submit(data_file)
    await asyncio.to_thread(syncs.close)
    await asyncio.sleep(0.05)  # the loop's half of the closing runs
    assert answers.codes == []  # nobody is told after close
    assert _open_rings() == rings_before


def _open_rings() -> int:
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # closed meanwhile
            count += os.readlink(f"/proc/self/fd/{fd}").startswith("anon_inode:[io_uring")
    return count


async def test_a_ring_opens_however_late_the_kernel_signals_its_probe() -> None:
    # The kernel may signal the eventfd a moment after the probe's completion shows (about 1
    # in a few thousand rings here): a ring must not be refused for that.
    loop = asyncio.get_running_loop()
    for _ in range(10_000):
        RingSyncs(loop, Answers()).close()
    await asyncio.sleep(0)  # the loop's half of each closing runs
