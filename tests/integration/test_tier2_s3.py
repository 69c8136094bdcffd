"""The store with Tier 2 on S3 (moto in server mode, on 127.0.0.1).

Every byte reaches the bucket and reads back identically through ``segmentstore tier2 ls|cat``
run as a real process; truncation and deletion remove exactly the right objects; an S3 outage
does not stop appends (they are acknowledged from Tier 1), and once S3 is back the writer
catches up with nothing lost or doubled. moto keeps its buckets in process-global state, so a
new server on the same port is the same S3 coming back.
"""

from __future__ import annotations

import asyncio
import os
import random
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from store_checks import flush, read_all, stored_segment
from tier2_cli import parse_ls, run_tier2_cli, wait_until

from segmentstore import ContainerUnavailableError, SegmentStore, Settings
from segmentstore.harness.moto_s3 import MotoTier2
from segmentstore.tier2 import (
    ChunkStorage,
    SegmentManifest,
    chunks_of,
    manifest_key,
    open_chunk_storage,
)

pytestmark = pytest.mark.s3

KiB = 1024
MiB = 1024 * KiB
BUCKET = "segmentstore-tier2"
CREDENTIALS = {"access_key": "testing", "secret_key": "testing", "region": "us-east-1"}
WRITER = {
    "flush_threshold_bytes": 1024,
    "flush_interval_ms": 50,
    "max_chunk_bytes": 64 * KiB,
    "retry_min_ms": 20,
    "retry_max_ms": 200,
}


@pytest.fixture
def moto() -> Iterator[MotoTier2]:
    """A moto S3 server on a port of its own that a test can stop and start again."""
    server = MotoTier2()
    server.start()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def location(moto: MotoTier2) -> str:
    """A fresh prefix in a bucket that exists (the store's settings cannot create it, see
    test_store_settings_can_create_the_bucket)."""
    uri = f"s3://{BUCKET}/{uuid.uuid4().hex}"
    open_chunk_storage(uri, options=typed_options(moto.endpoint, create_bucket=True)).close()
    return uri


def typed_options(endpoint: str, **extra: Any) -> dict[str, Any]:
    """Options as ``open_chunk_storage`` takes them from Python code."""
    return {"endpoint_url": endpoint, **CREDENTIALS, **extra}


def store_options(endpoint: str, **extra: str) -> dict[str, str]:
    """Options as the settings carry them (``tier2.options`` is a map of strings, as from a
    config file, the environment or ``--option``)."""
    return {"endpoint_url": endpoint, **CREDENTIALS, **extra}


def open_store(data: Path, uri: str, options: dict[str, str], **overrides: Any) -> SegmentStore:
    # The tier2 section goes through a Settings object: SegmentStore.open's ``tier2`` argument
    # is the URI alone, so ``tier2={...}`` cannot be passed as a section override.
    settings = Settings().with_overrides(tier2={"uri": uri, "options": options})
    writer = {**WRITER, **overrides.pop("storage_writer", {})}
    return SegmentStore.open(data, settings=settings, storage_writer=writer, **overrides)


def open_storage(uri: str, endpoint: str) -> ChunkStorage:
    return open_chunk_storage(uri, options=typed_options(endpoint, max_attempts=1))


def tier2_bytes(uri: str, endpoint: str, name: str) -> tuple[SegmentManifest, bytes]:
    return stored_segment(open_storage(uri, endpoint), name)


def objects(uri: str, endpoint: str, prefix: str = "") -> list[str]:
    storage = open_storage(uri, endpoint)
    try:
        return storage.list(prefix)
    finally:
        storage.close()


async def cli(endpoint: str, *args: str) -> tuple[int, bytes, str]:
    return await run_tier2_cli(*args, options=store_options(endpoint))


# -- tests --------------------------------------------------------------------------------


async def test_every_byte_reaches_s3_and_the_cli_reads_it_back(
    tmp_path: Path, moto: MotoTier2, location: str
) -> None:
    rng = random.Random(99)
    names = [f"s3/stream/{i}" for i in range(6)]
    expected = {name: bytearray() for name in names}
    max_chunk = WRITER["max_chunk_bytes"]
    async with open_store(tmp_path / "data", location, store_options(moto.endpoint)) as store:
        for name in names:
            await store.create_segment(name)

        async def writer(name: str, seed: int) -> None:
            own = random.Random(seed)
            for _ in range(15):
                roll = own.random()
                if roll < 0.15:
                    size = own.randint(max_chunk + 1, 3 * max_chunk)
                elif roll < 0.5:
                    size = own.randint(1000, 20_000)
                else:
                    size = own.randint(1, 300)
                payload = own.randbytes(size)
                await store.append(name, payload)
                expected[name] += payload

        await asyncio.gather(*(writer(n, rng.randrange(1 << 30)) for n in names))
        await store.seal(names[0])
        await flush(store)
        for name in names:
            info = await store.get_info(name)
            assert info.storage_length == info.length == len(expected[name]), info
            assert await read_all(store, name) == expected[name]

    for name in names:
        manifest, stored = tier2_bytes(location, moto.endpoint, name)
        assert stored == expected[name], name
        assert all(c.length <= max_chunk for c in manifest.chunks)
    # Nothing but the segments' own objects: their manifests and their chunks.
    owned = (*(manifest_key(n) for n in names), *(chunks_of(n) for n in names))
    keys = objects(location, moto.endpoint)
    assert keys and all(key.startswith(owned) for key in keys), keys
    assert {manifest_key(n) for n in names} <= set(keys)

    code, out, err = await cli(moto.endpoint, "ls", location)
    assert code == 0, err
    assert parse_ls(out.decode()) == {
        name: (0, len(expected[name]), name == names[0]) for name in names
    }
    results = await asyncio.gather(*(cli(moto.endpoint, "cat", location, n) for n in names))
    for name, (code, out, err) in zip(names, results, strict=True):
        assert code == 0, f"{name}: {err}"
        assert out == expected[name], f"{name}: cat gave {len(out)} of {len(expected[name])} bytes"


async def test_truncate_and_delete_remove_their_objects_from_the_bucket(
    tmp_path: Path, moto: MotoTier2, location: str
) -> None:
    name = "s3/trunc"
    manual = {"flush_threshold_bytes": 64 * MiB, "flush_interval_ms": 600_000}
    payload = os.urandom(50_000)
    async with open_store(
        tmp_path / "data", location, store_options(moto.endpoint), storage_writer=manual
    ) as store:
        await store.create_segment(name)
        for i in range(0, len(payload), 10_000):  # one chunk per flush: S3 cannot append
            await store.append(name, payload[i : i + 10_000])
            await flush(store)
        prefix = chunks_of(name)
        before = objects(location, moto.endpoint, prefix)
        # Each chunk with its index beside it, but the last: a small index stays in the manifest.
        assert len(before) == 9
        assert [key for key in before if key.endswith(".tidx")] == [
            f"{chunk}.tidx" for chunk in before[:-1:2]
        ]
        await store.truncate(name, 25_000)  # inside the third chunk [20000, 30000)
        await flush(store)
        assert objects(location, moto.endpoint, prefix) == before[4:]
        manifest, stored = tier2_bytes(location, moto.endpoint, name)
        assert (manifest.start_offset, stored) == (25_000, payload[25_000:])
        await store.delete_segment(name)
        await flush(store)
        assert objects(location, moto.endpoint, chunks_of(name)) == []
        assert objects(location, moto.endpoint, manifest_key(name)) == []
        await store.create_segment(name)
        await store.append(name, b"reborn")
        await flush(store)
    async with open_store(
        tmp_path / "data", location, store_options(moto.endpoint), storage_writer=manual
    ) as store:
        await flush(store)  # the replayed delete of the first incarnation
        assert await read_all(store, name) == b"reborn"
    assert tier2_bytes(location, moto.endpoint, name)[1] == b"reborn"


async def test_appends_go_on_through_an_s3_outage_and_nothing_is_lost(
    tmp_path: Path, moto: MotoTier2, location: str
) -> None:
    names = [f"outage/{i}" for i in range(4)]
    expected = {name: bytearray() for name in names}
    rng = random.Random(5)

    async def append_some(count: int) -> None:
        for _ in range(count):
            name = rng.choice(names)
            payload = rng.randbytes(rng.randint(1024, 8 * KiB))
            result = await store.append(name, payload)
            assert result.offset == len(expected[name])
            expected[name] += payload

    async def all_in_tier2() -> bool:
        infos = [await store.get_info(n) for n in names]
        return all(i.storage_length == i.length for i in infos)

    async def writers_are_well() -> bool:
        return all(w is not None and w.last_error is None for w in writers)

    async with open_store(tmp_path / "data", location, store_options(moto.endpoint)) as store:
        for name in names:
            await store.create_segment(name)
        await append_some(50)
        assert await wait_until(all_in_tier2, 10.0)
        stored_before = {n: (await store.get_info(n)).storage_length for n in names}

        moto.stop()
        await append_some(200)  # every one acknowledged, from Tier 1
        await asyncio.sleep(0.5)  # the writer meets the outage and backs off
        writers = [c.storage_writer for c in store.containers]
        assert any(w is not None and w.last_error for w in writers), "no flush was attempted"
        for name in names:
            info = await store.get_info(name)
            assert info.length == len(expected[name])
            assert info.storage_length <= info.length
        assert all(c.status.value == "running" for c in store.containers)

        moto.start()  # the same S3 (moto's state is process-global) at the same address
        assert await wait_until(all_in_tier2, 20.0), [await store.get_info(n) for n in names]
        await append_some(20)
        assert await wait_until(all_in_tier2, 10.0)
        # A writer clears its error when its whole step ends, a moment after the last bytes.
        assert await wait_until(writers_are_well, 5.0)
        for name in names:
            assert await read_all(store, name) == expected[name]
            assert (await store.get_info(name)).storage_length > stored_before[name]

    for name in names:
        manifest, stored = tier2_bytes(location, moto.endpoint, name)
        assert manifest.storage_length == len(expected[name])
        assert stored == expected[name], name
    code, out, err = await cli(moto.endpoint, "cat", location, names[0])
    assert (code, out == expected[names[0]]) == (0, True), err


async def test_reads_of_evicted_bytes_during_an_outage_fail_loudly_then_recover(
    tmp_path: Path, moto: MotoTier2, location: str
) -> None:
    """Bytes only S3 has cannot be served while it is down: the read fails as unavailable
    (503), never comes back empty or wrong, and succeeds once S3 is back. The same holds for
    a transaction merged during the outage, whose bytes are still under its own manifest."""
    async with open_store(
        tmp_path / "data",
        location,
        store_options(moto.endpoint),
        store={"max_append_bytes": 256 * KiB},
        cache={"max_bytes": 2 * MiB, "max_entry_bytes": 64 * KiB},
        storage_writer={"max_chunk_bytes": 256 * KiB, "read_block_bytes": 64 * KiB},
    ) as store:
        await store.create_segment("target")
        await store.append("target", b"T" * 1000)
        txn = await store.begin_transaction("target")
        body = os.urandom(300 * KiB)
        for i in range(0, len(body), 100 * KiB):
            await store.append(txn, body[i : i + 100 * KiB])
        await store.create_segment("filler")
        filler = bytearray()
        for _ in range(40):  # four times the cache: the transaction's bytes are evicted
            payload = os.urandom(200 * KiB)
            await store.append("filler", payload)
            filler += payload
        await flush(store)
        assert store.cache_manager.stats.evictions > 0

        moto.stop()
        merged = await store.merge("target", txn)  # Tier 1 alone acknowledges it
        assert (merged.offset, merged.length) == (1000, 1000 + len(body))
        for name, offset in (("target", 1000), ("target", 1000 + 150 * KiB), ("filler", 0)):
            with pytest.raises(ContainerUnavailableError):
                await store.read(name, offset, 1000)

        moto.start()
        assert await read_all(store, "target") == b"T" * 1000 + body
        assert await read_all(store, "filler") == filler
        await flush(store)
    assert tier2_bytes(location, moto.endpoint, "target")[1] == b"T" * 1000 + body


async def test_store_settings_can_create_the_bucket(tmp_path: Path, moto: MotoTier2) -> None:
    """``tier2.options`` is a map of strings (config file, environment, ``--option``); the S3
    backend's non-string options (``create_bucket``, timeouts, ``max_attempts``) must still be
    usable from there."""
    uri = f"s3://fresh-{uuid.uuid4().hex[:12]}/prefix"
    options = store_options(moto.endpoint, create_bucket="true", max_attempts="2")
    async with open_store(tmp_path / "data", uri, options) as store:
        await store.create_segment("made")
        await store.append("made", b"in a bucket the store made")
        await flush(store)
    assert tier2_bytes(uri, moto.endpoint, "made")[1] == b"in a bucket the store made"
