"""The rebuild as an operator runs it: ``segmentstore serve`` processes killed with SIGKILL, the
data directory deleted, a start refused, one start with ``--rebuild-from-tier2``, and a plain
restart after it."""

from __future__ import annotations

import os
import random
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from store_checks import stored_segment

from segmentstore.client import SegmentStoreClient
from segmentstore.harness.served_store import ServedStore
from segmentstore.tier2 import FileChunkStorage, ManifestStore

pytestmark = pytest.mark.integration

STARTUP_TIMEOUT_S = 60.0
# Tier 2 is shared by every server of a test, as a volume that outlives the node would be.
SETTINGS = {"SEGMENTSTORE_STORAGE_WRITER__FLUSH_INTERVAL_MS": "50"}
NAMES = [f"served/stream/{i}" for i in range(6)]


@pytest.fixture
def servers() -> Iterator[list[ServedStore]]:
    started: list[ServedStore] = []
    yield started
    for server in started:
        server.stop(timeout_s=30)


def start(
    servers: list[ServedStore], data: Path, tier2: Path, *args: str, ready: bool = True
) -> ServedStore:
    settings = {**SETTINGS, "SEGMENTSTORE_TIER2__URI": tier2.as_uri()}
    log_path = data.parent / f"serve-{len(servers)}.log"
    server = ServedStore(data, log_path, settings, list(args), environ=os.environ)
    servers.append(server)
    if ready:
        server.wait_ready(STARTUP_TIMEOUT_S)
    return server


def storage_length(tier2: Path, name: str) -> int:
    loaded = ManifestStore(FileChunkStorage(tier2)).load(name)
    return 0 if loaded is None else loaded[0].storage_length


def kept_attributes(tier2: Path, name: str) -> dict[str, int]:
    """The attributes the segment's manifest kept with its state (none if it keeps no state)."""
    loaded = ManifestStore(FileChunkStorage(tier2)).load(name)
    state = None if loaded is None else loaded[0].state
    return {} if state is None else dict(state.attributes)


def wait_flushed(tier2: Path, lengths: dict[str, int]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if all(storage_length(tier2, name) == length for name, length in lengths.items()):
            return
        time.sleep(0.05)
    raise AssertionError(f"Tier 2 did not get {lengths} in time")


def read_whole(client: SegmentStoreClient, name: str) -> bytes:
    info = client.get_info(name)
    out = bytearray()
    while info.start_offset + len(out) < info.length:
        out += client.read(name, info.start_offset + len(out)).data
    return bytes(out)


def test_a_served_store_rebuilt_after_its_data_directory_was_deleted(
    tmp_path: Path, servers: list[ServedStore]
) -> None:
    data, tier2 = tmp_path / "data", tmp_path / "tier2"
    rng = random.Random(23)
    expected = {name: rng.randbytes(rng.randint(1, 40_000)) for name in NAMES}
    first = start(servers, data, tier2)
    with SegmentStoreClient(first.url) as client:
        for name, payload in expected.items():
            client.create_segment(name)
            client.append(name, payload)
        client.update_attributes(NAMES[0], [{"key": "a", "value": 1}])
    wait_flushed(tier2, {name: len(payload) for name, payload in expected.items()})
    first.sigkill()
    shutil.rmtree(data)
    # The attribute is in Tier 2 only if a save of the segment's state followed it in time.
    kept = kept_attributes(tier2, NAMES[0])
    assert kept in ({}, {"a": 1})

    refused = start(servers, data, tier2, ready=False)
    assert refused.proc.wait(timeout=STARTUP_TIMEOUT_S) != 0
    assert "--rebuild-from-tier2" in refused.log()

    rebuilt = start(servers, data, tier2, "--rebuild-from-tier2")
    with SegmentStoreClient(rebuilt.url) as client:
        for name, payload in expected.items():
            assert read_whole(client, name) == payload
        # What the manifest kept comes back; what changed after its last save went with Tier 1.
        assert client.get_attributes(NAMES[0]) == kept
        for name in NAMES:
            more = rng.randbytes(5000)
            client.append(name, more)
            expected[name] += more
    wait_flushed(tier2, {name: len(payload) for name, payload in expected.items()})
    assert "lost with Tier 1: what changed after the segment's last flush" in rebuilt.log()
    rebuilt.sigkill()

    again = start(servers, data, tier2)
    with SegmentStoreClient(again.url) as client:
        for name, payload in expected.items():
            assert read_whole(client, name) == payload
    assert "from Tier 2: bytes" not in again.log()  # no rebuild again
    for name, payload in expected.items():
        assert stored_segment(FileChunkStorage(tier2), name)[1] == payload
