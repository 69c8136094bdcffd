"""Fixtures for Tier 2 tests: one harness per ``ChunkStorage`` backend, so that the contract suite
and everything built on chunk storage (manifests, the segment reader) run against each of them.

S3 is moto in server mode (pyarrow's C++ client cannot be intercepted in process), one server
for the session on 127.0.0.1, a fresh prefix per test. HDFS skips where pyarrow cannot load
libhdfs, which is everywhere this project is tested today.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fault_injection import FaultInjector
from flaky_tier2 import FlakyChunkStorage
from memory_tier2 import InMemoryTier2

from segmentstore.harness.moto_s3 import MotoServer
from segmentstore.tier2 import ChunkStorage, Tier2UnavailableError, open_chunk_storage

BUCKET = "tier2-tests"
FAKE_CREDENTIALS = {"access_key": "testing", "secret_key": "testing", "region": "us-east-1"}


def s3_options(endpoint: str, **overrides: Any) -> dict[str, Any]:
    """Options for a moto endpoint: fake credentials, the bucket made on open, and one attempt
    with short timeouts, so that a failing backend fails a test at once instead of retrying."""
    options: dict[str, Any] = {
        "endpoint_url": endpoint,
        "create_bucket": True,
        "max_attempts": 1,
        "connect_timeout_s": 2.0,
        "request_timeout_s": 10.0,
        **FAKE_CREDENTIALS,
    }
    options.update(overrides)
    return options


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    server = MotoServer()
    try:
        yield server.endpoint
    finally:
        server.stop()


@pytest.fixture
def start_moto() -> Iterator[Callable[[], MotoServer]]:
    """Starts private moto servers (for tests that stop them); all are stopped afterwards."""
    started: list[MotoServer] = []

    def start() -> MotoServer:
        started.append(MotoServer())
        return started[-1]

    yield start
    for server in started:
        server.stop()


@pytest.fixture(name="s3_options")
def s3_options_fixture() -> Callable[..., dict[str, Any]]:
    return s3_options


class StorageHarness:
    """One backend under test, bound to one fresh, empty location."""

    name: str
    # Whether this backend, as run in the tests, decides concurrent put_if races itself. moto
    # compares and writes without a lock, so concurrency tests there would test moto, not S3.
    atomic_conditional_writes: bool

    def open(self) -> ChunkStorage:
        """A new client of this harness's location (the same location every call)."""
        raise NotImplementedError


class FileHarness(StorageHarness):
    name = "file"
    atomic_conditional_writes = True

    def __init__(self, request: pytest.FixtureRequest, tmp_path: Path) -> None:
        self.root = tmp_path / "tier2"

    def open(self) -> ChunkStorage:
        return open_chunk_storage(f"file://{self.root}")


class S3Harness(StorageHarness):
    name = "s3"
    atomic_conditional_writes = False

    def __init__(self, request: pytest.FixtureRequest, tmp_path: Path) -> None:
        self.endpoint: str = request.getfixturevalue("moto_endpoint")
        self.uri = f"s3://{BUCKET}/{uuid.uuid4().hex}"

    def open(self) -> ChunkStorage:
        return open_chunk_storage(self.uri, options=s3_options(self.endpoint))


class HdfsHarness(StorageHarness):
    name = "hdfs"
    atomic_conditional_writes = True
    _unavailable: str | None = None  # why HDFS could not be opened, found once per session

    def __init__(self, request: pytest.FixtureRequest, tmp_path: Path) -> None:
        self.uri = f"hdfs://127.0.0.1:8020/tier2-tests/{uuid.uuid4().hex}"
        if HdfsHarness._unavailable is None:
            try:
                open_chunk_storage(self.uri).close()
                HdfsHarness._unavailable = ""
            except Tier2UnavailableError as e:
                HdfsHarness._unavailable = e.reason
        if HdfsHarness._unavailable:
            pytest.skip(f"no HDFS to test against: {HdfsHarness._unavailable}")

    def open(self) -> ChunkStorage:
        return open_chunk_storage(self.uri)


class MemoryHarness(StorageHarness):
    """The in-memory double of tests/support, held to the same contract as the backends."""

    name = "memory"
    atomic_conditional_writes = True

    def __init__(self, request: pytest.FixtureRequest, tmp_path: Path) -> None:
        self.location = InMemoryTier2()

    def open(self) -> ChunkStorage:
        return self.location.client()


class FlakyMemoryHarness(MemoryHarness):
    """The fault-injecting wrapper with no fault set, which must change nothing."""

    name = "flaky-memory"

    def open(self) -> ChunkStorage:
        return FlakyChunkStorage(self.location.client(), FaultInjector())


# Another backend joins every Tier 2 suite by adding its harness here.
HARNESSES: dict[str, Callable[[pytest.FixtureRequest, Path], StorageHarness]] = {
    "file": FileHarness,
    "memory": MemoryHarness,
    "flaky-memory": FlakyMemoryHarness,
    "s3": S3Harness,
    "hdfs": HdfsHarness,
}
_MARKS = {"s3": [pytest.mark.s3]}


@pytest.fixture(
    params=[pytest.param(name, marks=_MARKS.get(name, [])) for name in sorted(HARNESSES)]
)
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> StorageHarness:
    return HARNESSES[request.param](request, tmp_path)


@pytest.fixture
def open_storage(harness: StorageHarness) -> Iterator[Callable[[], ChunkStorage]]:
    """Opens clients of the harness's location; every one is closed after the test."""
    opened: list[ChunkStorage] = []

    def open_one() -> ChunkStorage:
        opened.append(harness.open())
        return opened[-1]

    yield open_one
    for storage in opened:
        storage.close()


@pytest.fixture
def storage(open_storage: Callable[[], ChunkStorage]) -> ChunkStorage:
    return open_storage()
