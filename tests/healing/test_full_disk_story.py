"""The full-disk story of a real ``segmentstore serve`` process, told by its HTTP answers, with
a Tier 1 volume that holds many log files: Tier 2 fills up, so Tier 1 cannot be truncated and
fills up in turn; the containers turn read-only (appends 507, reads 200, the node still ready
but not writable); a restart asked for then is refused and leaves them serving reads; Tier 2
gets room, and with no request from anyone the Storage Writer catches up, Tier 1 is truncated
behind it and every container runs again, with every acknowledged byte in place."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from segmentstore.contracts.mapping import container_of
from segmentstore.drill.small_disk import SmallDisk, SmallDiskUnavailable
from segmentstore.harness.served_store import ServedStore

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CONTAINERS = 2
TIER1_BYTES = 48 << 20
LOG_FILE_BYTES = 2 << 20  # Tier 1 holds two dozen log files before it is full
PIECE = 64 << 10


@pytest.fixture
def disks(tmp_path: Path) -> Iterator[tuple[SmallDisk, SmallDisk]]:
    tier1 = SmallDisk(tmp_path / "tier1", TIER1_BYTES)
    tier2 = SmallDisk(tmp_path / "t2", 4 * TIER1_BYTES)  # filled with ballast at first
    try:
        tier1.mount()
        tier2.mount()
    except SmallDiskUnavailable as reason:
        tier1.unmount()
        pytest.skip(str(reason))
    try:
        yield tier1, tier2
    finally:
        tier1.unmount()
        tier2.unmount()


@pytest.fixture
def node(disks: tuple[SmallDisk, SmallDisk], tmp_path: Path) -> Iterator[ServedStore]:
    tier1, tier2 = disks
    settings = {
        "SEGMENTSTORE_TIER1__SEGMENT_BYTES": str(LOG_FILE_BYTES),
        "SEGMENTSTORE_DURABLE_LOG__CHECKPOINT_EVERY_BYTES": str(LOG_FILE_BYTES),
        # Unflushed appends stay in the cache: room for all of Tier 1 (else 429 comes first).
        "SEGMENTSTORE_CACHE__MAX_BYTES": str(2 * TIER1_BYTES),
        "SEGMENTSTORE_STORAGE_WRITER__FLUSH_INTERVAL_MS": "200",
        "SEGMENTSTORE_STORAGE_WRITER__RETRY_MIN_MS": "100",
        "SEGMENTSTORE_STORAGE_WRITER__RETRY_MAX_MS": "500",
        "SEGMENTSTORE_STORE__RECOVERY_RETRY_MIN_MS": "200",
        "SEGMENTSTORE_STORE__RECOVERY_RETRY_MAX_MS": "1000",
    }
    args = ["--containers", str(CONTAINERS), "--tier2", (tier2.path / "tier2").as_uri()]
    served = ServedStore(
        tier1.path / "data", tmp_path / "serve.log", settings, args, environ=os.environ
    )
    try:
        served.wait_ready(60)
        yield served
    finally:
        served.stop()


def statuses(http: httpx.Client) -> dict[int, str]:
    return {c["id"]: c["status"] for c in http.get("/v1/containers").json()["containers"]}


def read_whole(http: httpx.Client, name: str) -> bytes:
    length = http.get(f"/v1/segments/{name}").json()["length"]
    data = bytearray()
    while len(data) < length:
        answer = http.get(f"/v1/segments/{name}:read", params={"offset": len(data)})
        assert answer.status_code == 200, answer.text
        data += answer.content
    return bytes(data)


def test_tier2_full_then_tier1_full_then_room_again_heals_by_itself(
    node: ServedStore, disks: tuple[SmallDisk, SmallDisk]
) -> None:
    tier1, tier2 = disks
    names = [
        next(n for i in range(100) if container_of(n := f"disk/{c}/{i}", CONTAINERS) == c)
        for c in range(CONTAINERS)
    ]
    acknowledged = {name: bytearray() for name in names}
    with httpx.Client(base_url=node.url, timeout=60) as http:
        for name in names:
            assert http.put(f"/v1/segments/{name}").status_code == 201
        tier2.fill()  # Tier 2 full: appends go on into Tier 1 and the cache

        seq, refused = 0, {}  # name -> the append answered 507 (wholly there later, or not)
        while len(refused) < CONTAINERS:
            for writer, name in enumerate(names):
                if name in refused:
                    continue
                piece = bytes([seq % 251]) * PIECE
                headers = {"Writer-Id": f"w{writer}", "Writer-Seq": str(seq)}
                answer = http.post(f"/v1/segments/{name}:append", content=piece, headers=headers)
                if answer.status_code == 507:
                    assert answer.json()["error"]["code"] == "insufficient_storage"
                    refused[name] = piece
                    continue
                assert answer.status_code == 200, answer.text
                acknowledged[name] += piece
            seq += 1
            assert seq < 4 * TIER1_BYTES // PIECE, "Tier 1 never filled up"
        filled_with = sum(len(data) for data in acknowledged.values())
        assert filled_with > 4 * LOG_FILE_BYTES, filled_with
        assert set(statuses(http).values()) == {"read_only"}

        # Read-only: reads served, the node ready (for reads) and not writable.
        for name in names:
            assert read_whole(http, name) == acknowledged[name]
        assert http.get("/readyz").status_code == 200
        health = http.get("/healthz").json()
        assert health["writable"] is False
        assert health["read_only_containers"] == list(range(CONTAINERS))
        metrics = http.get("/metrics").text
        assert "segmentstore_node_writable 0.0" in metrics
        assert "segmentstore_node_ready 1.0" in metrics

        # A restart asked for now is refused: the container keeps serving its reads.
        restart = http.post("/v1/containers/0:restart")
        assert restart.status_code == 507, restart.text
        assert "stays read-only" in restart.json()["error"]["message"]
        assert statuses(http)[0] == "read_only"
        assert read_whole(http, names[0]) == acknowledged[names[0]]

        # Tier 2 gets room; nobody asks anything of the node but to look at it.
        tier2.make_room()
        room_at = time.monotonic()
        deadline = room_at + 60
        while set(statuses(http).values()) != {"running"}:
            assert time.monotonic() < deadline, f"not running again: {statuses(http)}"
            time.sleep(0.2)
        healed_s = time.monotonic() - room_at
        lag = {
            c["id"]: c["tier2_lag_bytes"] for c in http.get("/v1/containers").json()["containers"]
        }
        print(
            f"{filled_with >> 20} MiB filled Tier 1 ({TIER1_BYTES >> 20} MiB, log files of"
            f" {LOG_FILE_BYTES >> 20} MiB); every container ran again {healed_s:.1f} s after"
            f" Tier 2 had room; Tier 1 free then {tier1.free_bytes >> 20} MiB; lag {lag}"
        )
        assert http.get("/healthz").json()["writable"] is True
        for name in names:
            # An append answered 507 was never acknowledged: it is wholly there, or not at all.
            data = read_whole(http, name)
            assert data in (acknowledged[name], acknowledged[name] + refused[name])
            acknowledged[name][:] = data
        for writer, name in enumerate(names):
            headers = {"Writer-Id": f"w{writer}", "Writer-Seq": str(seq)}
            answer = http.post(f"/v1/segments/{name}:append", content=b"after", headers=headers)
            assert answer.status_code == 200, answer.text
            if not answer.json().get("duplicate"):
                acknowledged[name] += b"after"
            assert read_whole(http, name) == acknowledged[name]
        containers = http.get("/v1/containers").json()["containers"]
        assert all(c["recoveries"] >= 1 for c in containers), containers
    assert not list(tier1.path.rglob("META.tmp")), "a recovery left a META.tmp behind"
