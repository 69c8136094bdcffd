"""Tier 1 lost after a flush, rebuilt from Tier 2 (``store.rebuild_from_tier2``): the rebuilt
store serves every flushed byte of every segment, names what was lost, accepts appends that
reach Tier 2, and recovers normally from its new Tier 1 afterwards. Without the opt-in, the
store refuses to start instead.

Real components only: a real store over a real data directory, Tier 2 in a directory or on S3
(moto in server mode on 127.0.0.1), Tier 1 deleted on disk.
"""

from __future__ import annotations

import json
import logging
import random
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from store_checks import flush, read_all, stored_segment

from segmentstore import DataCorruptedError, InvalidArgumentError, SegmentStore, Settings
from segmentstore.tier2 import ChunkStorage, SegmentManifest, open_chunk_storage

CREDENTIALS = {"access_key": "testing", "secret_key": "testing", "region": "us-east-1"}
# Flushes happen when the test says (flush_all), never behind its back: what Tier 1 alone holds
# at the loss is known exactly.
WRITER = {
    "flush_interval_ms": 3_600_000,
    "flush_threshold_bytes": 64 << 20,
    "max_chunk_bytes": 8192,
}
UNFLUSHED = b"never flushed"
SEGMENTS = [f"rebuild/stream/{i}" for i in range(9)]  # in all four containers


@dataclass
class Tier2:
    uri: str
    options: dict[str, str]

    def storage(self) -> ChunkStorage:
        return open_chunk_storage(self.uri, options=dict(self.options))

    def segment(self, name: str) -> tuple[SegmentManifest, bytes]:
        return stored_segment(self.storage(), name)

    def open_store(self, data_dir: Path, **store: Any) -> SegmentStore:
        settings = Settings().with_overrides(tier2={"uri": self.uri, "options": self.options})
        return SegmentStore.open(
            data_dir, settings=settings, storage_writer=WRITER, store=store, containers=4
        )


@pytest.fixture(params=["file", pytest.param("s3", marks=pytest.mark.s3)])
def tier2(request: pytest.FixtureRequest, tmp_path: Path) -> Tier2:
    if request.param == "file":
        return Tier2((tmp_path / "tier2").as_uri(), {})
    endpoint = request.getfixturevalue("moto_endpoint")
    uri = f"s3://rebuild/{uuid.uuid4().hex}"
    open_chunk_storage(
        uri, options={"endpoint_url": endpoint, "create_bucket": True, **CREDENTIALS}
    ).close()
    return Tier2(uri, {"endpoint_url": endpoint, **CREDENTIALS})


async def fill(store: SegmentStore, rng: random.Random) -> dict[str, bytes]:
    """Segments in every container, with what Tier 1 alone keeps (attributes, writer ids,
    retention), one truncated and one sealed; flushed, then one more append that is not."""
    for i, name in enumerate(SEGMENTS):
        await store.create_segment(name, attributes={"owner": i} if i % 2 else None)
        for _ in range(rng.randint(1, 5)):
            await store.append(name, rng.randbytes(rng.randint(1, 6000)))
    await store.append(SEGMENTS[0], b"once", writer_id="w", writer_seq=1)
    await store.set_retention(SEGMENTS[1], {"bytes": 1 << 30})
    await store.truncate(SEGMENTS[2], 100)
    await flush(store)
    # Owners of later epochs flush too: the manifests carry epochs a new Tier 1 starts below.
    for _ in range(3):
        for container in store.containers:
            await store.restart_container(container.id)
    for name in SEGMENTS:
        await store.append(name, rng.randbytes(rng.randint(1, 3000)))
    await store.seal(SEGMENTS[3])
    await flush(store)
    await store.append(SEGMENTS[4], UNFLUSHED)
    assert {c.id for c in store.containers if c.active_names()} == {0, 1, 2, 3}
    return {name: await read_all(store, name) for name in SEGMENTS}


async def serves_what_was_flushed(store: SegmentStore, before: dict[str, bytes]) -> None:
    """Every segment's bytes as ``fill`` left them, but the one append never flushed."""
    for name in SEGMENTS:
        flushed = before[name][: -len(UNFLUSHED)] if name == SEGMENTS[4] else before[name]
        assert await read_all(store, name) == flushed


async def test_tier1_deleted_after_a_flush_is_rebuilt_from_tier2(
    tmp_path: Path, tier2: Tier2, caplog: pytest.LogCaptureFixture
) -> None:
    data = tmp_path / "data"
    async with tier2.open_store(data) as store:
        before = await fill(store, random.Random(17))
    flushed = {name: tier2.segment(name) for name in SEGMENTS}
    assert flushed[SEGMENTS[4]][0].storage_length == len(before[SEGMENTS[4]]) - len(UNFLUSHED)
    assert flushed[SEGMENTS[2]][0].start_offset == 100
    owner_epochs = max(m.owner_epoch for m, _ in flushed.values())
    assert owner_epochs >= 4
    shutil.rmtree(data)  # the Tier 1 volume is gone

    with pytest.raises(InvalidArgumentError, match="--rebuild-from-tier2"):
        await tier2.open_store(data).start()

    with caplog.at_level(logging.WARNING, logger="segmentstore"):
        async with tier2.open_store(data, rebuild_from_tier2=True) as store:
            assert all(c.epoch > owner_epochs for c in store.containers)
            for name in SEGMENTS:
                manifest, flushed_bytes = flushed[name]
                info = await store.get_info(name)
                assert (info.start_offset, info.length) == (
                    manifest.start_offset,
                    manifest.storage_length,
                )
                assert info.sealed == (name == SEGMENTS[3])
                assert await read_all(store, name) == flushed_bytes  # byte for byte
                # Its manifest kept its state with its last flushed bytes: restored too.
                i = SEGMENTS.index(name)
                assert await store.get_attributes(name) == ({"owner": i} if i % 2 else {})
            # The time index sidecars in Tier 2 still serve :offsetAt over the restored bytes.
            assert await store.offset_at(SEGMENTS[0], 0) == 0
            # So is exactly-once state: the append flushed with it is still a duplicate.
            again = await store.append(SEGMENTS[0], b"once", writer_id="w", writer_seq=1)
            assert again.duplicate
            unsealed = [name for name in SEGMENTS if name != SEGMENTS[3]]
            more = {name: random.Random(name).randbytes(3000) for name in unsealed}
            for name, payload in more.items():
                await store.append(name, payload)
            await store.create_segment("rebuild/new")  # ids go on above the restored ones
            await store.append("rebuild/new", b"new")
            await flush(store)
            expected = {name: await read_all(store, name) for name in [*SEGMENTS, "rebuild/new"]}

    lines = [r.getMessage() for r in caplog.records]
    for name in SEGMENTS:
        assert any(
            repr(name) in line and "lost with Tier 1: what changed after" in line for line in lines
        )
    assert any("segments restored with every flushed byte (9 with their state)" in line
               for line in lines)  # fmt: skip
    report = json.loads((data / "rebuild-report.json").read_text())
    assert report["lost_for_every_segment"][0].startswith("what changed after the segment's")
    assert "attributes" in report["lost_where_state_not_kept"]
    rebuilt = {s["name"]: s for c in report["containers"] for s in c["segments"]}
    assert set(rebuilt) == set(SEGMENTS)
    assert all(c["tier1"] == "rebuilt" for c in report["containers"])
    for name, (manifest, _) in flushed.items():
        assert rebuilt[name]["length"] == manifest.storage_length
        assert rebuilt[name]["segment_id"] == manifest.segment_id
        assert rebuilt[name]["state_kept"]

    # The appends after the rebuild reached Tier 2, in new chunks after the restored length.
    for name, payload in expected.items():
        manifest, stored = tier2.segment(name)
        assert stored == payload
        if name in more:
            assert manifest.owner_epoch > owner_epochs
            assert manifest.chunks[-1].start_offset >= flushed[name][0].storage_length

    # A restart recovers from the new Tier 1, with or without the option: no rebuild again.
    report_before = (data / "rebuild-report.json").read_text()
    caplog.clear()
    async with tier2.open_store(data, rebuild_from_tier2=True) as store:
        for name, payload in expected.items():
            assert await read_all(store, name) == payload
    assert not any("rebuilt" in r.getMessage() for r in caplog.records)
    assert (data / "rebuild-report.json").read_text() == report_before


async def test_tier1_deleted_beside_its_identity_is_refused_then_rebuilt(tmp_path: Path) -> None:
    """Only ``tier1/`` lost, ``store.json`` still there: refused, not started empty."""
    tier2 = Tier2((tmp_path / "tier2").as_uri(), {})
    data = tmp_path / "data"
    async with tier2.open_store(data) as store:
        before = await fill(store, random.Random(3))
    shutil.rmtree(data / "tier1")
    with pytest.raises(InvalidArgumentError, match="has no Tier 1 for any of its containers"):
        await tier2.open_store(data).start()
    async with tier2.open_store(data, rebuild_from_tier2=True) as store:
        await serves_what_was_flushed(store, before)


async def test_one_container_directory_deleted_is_refused_then_rebuilt_alone(
    tmp_path: Path,
) -> None:
    """One container's Tier 1 directory lost, the others whole: refused (not started with
    that container empty), then rebuilt alone; the others keep everything Tier 1 held."""
    tier2 = Tier2((tmp_path / "tier2").as_uri(), {})
    data = tmp_path / "data"
    async with tier2.open_store(data) as store:
        before = await fill(store, random.Random(11))
        route = {name: store.container_of(name) for name in SEGMENTS}
    # Not the containers of the unflushed append or of the exactly-once one: those stay.
    kept_state = {route[SEGMENTS[0]], route[SEGMENTS[4]]}
    lost = next(c for c in range(4) if c not in kept_state)
    shutil.rmtree(data / "tier1" / f"container-{lost:04d}")

    refused = f"has no Tier 1 for container {lost} .*container-{lost:04d}"
    with pytest.raises(InvalidArgumentError, match=refused):
        await tier2.open_store(data).start()
    assert not (data / "tier1" / f"container-{lost:04d}").exists()  # refusing changed nothing

    async with tier2.open_store(data, rebuild_from_tier2=True) as store:
        for i, name in enumerate(SEGMENTS):
            assert await read_all(store, name) == before[name]  # every byte was flushed there
            # Kept by Tier 1 in the whole containers, and by the manifests (saved with the
            # segments' last flush) in the rebuilt one.
            assert await store.get_attributes(name) == ({"owner": i} if i % 2 else {})
        again = await store.append(SEGMENTS[0], b"once", writer_id="w", writer_seq=1)
        assert again.duplicate  # the exactly-once state of a kept container is still there
    report = json.loads((data / "rebuild-report.json").read_text())
    assert [c["tier1"] for c in report["containers"]] == [
        "rebuilt" if c == lost else "kept" for c in range(4)
    ]


async def test_an_interrupted_rebuild_is_run_again_and_keeps_what_it_wrote(
    tmp_path: Path,
) -> None:
    """A rebuild that stopped after some containers (its mark still in the data directory)
    is not started as if whole: the next start rebuilds the rest and keeps the others."""
    tier2 = Tier2((tmp_path / "tier2").as_uri(), {})
    data = tmp_path / "data"
    async with tier2.open_store(data) as store:
        before = await fill(store, random.Random(5))
    shutil.rmtree(data)
    async with tier2.open_store(data, rebuild_from_tier2=True):
        pass
    # As if it had stopped after containers 0 and 1.
    (data / "rebuild.incomplete").touch()
    (data / "store.json").unlink()
    for container in (2, 3):
        shutil.rmtree(data / "tier1" / f"container-{container:04d}")
    with pytest.raises(InvalidArgumentError, match="has no Tier 1"):
        await tier2.open_store(data).start()
    async with tier2.open_store(data, rebuild_from_tier2=True) as store:
        await serves_what_was_flushed(store, before)
    report = json.loads((data / "rebuild-report.json").read_text())
    assert [c["tier1"] for c in report["containers"]] == ["kept", "kept", "rebuilt", "rebuilt"]
    assert not (data / "rebuild.incomplete").exists()


async def test_a_rebuild_verifies_what_it_adopts_and_names_the_damage(tmp_path: Path) -> None:
    """A byte flipped in a chunk before the rebuild: the report and the log name the damaged
    range, the segment keeps its length (the offsets its writers were told), and a read of
    the range is refused as data_corrupted while the rest reads byte for byte."""
    tier2 = Tier2((tmp_path / "tier2").as_uri(), {})
    data = tmp_path / "data"
    async with tier2.open_store(data) as store:
        before = await fill(store, random.Random(18))
    name = SEGMENTS[5]
    manifest, stored = tier2.segment(name)
    chunk = manifest.chunks[0]
    storage = tier2.storage()
    damaged = bytearray(storage.read(chunk.key, 0, chunk.length))
    damaged[chunk.length // 2] ^= 0x01
    storage.delete(chunk.key)
    storage.create(chunk.key, [bytes(damaged)])
    storage.close()
    shutil.rmtree(data)
    async with tier2.open_store(data, rebuild_from_tier2=True) as store:
        assert (await store.get_info(name)).length == manifest.storage_length
        with pytest.raises(DataCorruptedError) as refused:
            await store.read(name, chunk.start_offset + chunk.length // 2, 1)
        assert (refused.value.segment, refused.value.chunk) == (name, chunk.key)
        assert refused.value.start <= chunk.start_offset + chunk.length // 2 < refused.value.end
        for other in SEGMENTS:
            if other not in (name, SEGMENTS[4]):
                assert await read_all(store, other) == before[other]
    report = json.loads((data / "rebuild-report.json").read_text())
    rebuilt = {s["name"]: s for c in report["containers"] for s in c["segments"]}
    (damage,) = rebuilt[name]["damaged"]
    assert damage.startswith(f"[{refused.value.start}, {refused.value.end}) in chunk {chunk.key}")
    assert all(not s["damaged"] for n, s in rebuilt.items() if n != name)
    assert stored  # the manifest's bytes were there before the damage
