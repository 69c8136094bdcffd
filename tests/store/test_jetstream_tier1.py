"""A store whose Tier 1 is the JetStream cluster: nothing on its own disk, one fixed count."""

from __future__ import annotations

import asyncio
import itertools
import time
from pathlib import Path
from typing import Any

import pytest

from segmentstore import InvalidArgumentError, SegmentStore, SegmentStoreError
from segmentstore.cli.serve import add_command
from segmentstore.config import load_settings
from segmentstore.containers.status import ContainerStatus
from segmentstore.harness.jetstream_cluster import JetStreamCluster

_PREFIXES = itertools.count()


def jetstream_tier1(cluster: JetStreamCluster) -> dict[str, Any]:
    prefix = f"store{next(_PREFIXES)}"
    return {"mode": "jetstream", "jetstream": {"servers": cluster.servers, "stream_prefix": prefix}}


async def test_a_store_on_jetstream_keeps_nothing_on_its_disk(
    jetstream_cluster: JetStreamCluster, tmp_path: Path
) -> None:
    data_dir, tier2 = tmp_path / "node", tmp_path / "shared-tier2"
    tier1 = jetstream_tier1(jetstream_cluster)
    async with SegmentStore.open(data_dir, tier2=tier2.as_uri(), tier1=tier1) as store:
        await store.create_segment("js/0")
        await store.append("js/0", b"hello ")
        await store.append("js/0", b"world")
    assert not data_dir.exists()
    # Another node with an empty disk recovers the container from JetStream.
    async with SegmentStore.open(tmp_path / "other", tier2=tier2.as_uri(), tier1=tier1) as store:
        assert bytes(await store.read("js/0", 0)) == b"hello world"
        assert all(c.epoch == 2 for c in store.containers)
        with pytest.raises(InvalidArgumentError, match="container count cannot change"):
            await SegmentStore.open(
                tmp_path / "third", containers=8, tier2=tier2.as_uri(), tier1=tier1
            ).start()


def test_the_command_line_and_environment_name_the_jetstream_servers(tmp_path: Path) -> None:
    import argparse

    parser = argparse.ArgumentParser()
    add_command(parser.add_subparsers())
    args = parser.parse_args(
        ["serve", "--tier1", "jetstream", "--nats", "nats://a:4222,nats://b:4222"]
    )
    from segmentstore.cli.serve import _settings

    settings = _settings(args)
    assert settings.tier1.mode == "jetstream"
    assert settings.tier1.jetstream.servers == ("nats://a:4222", "nats://b:4222")
    environ = {
        "SEGMENTSTORE_TIER1__MODE": "jetstream",
        "SEGMENTSTORE_TIER1__JETSTREAM__SERVERS": "nats://c:4222",
        "SEGMENTSTORE_TIER1__JETSTREAM__REPLICAS": "5",
    }
    settings = load_settings(None, environ, {})
    assert settings.tier1.jetstream.servers == ("nats://c:4222",)
    assert settings.tier1.jetstream.replicas == 5
    assert settings.tier1.jetstream.stream_prefix == "segmentstore"


async def test_a_container_whose_publisher_died_recovers_by_itself(
    jetstream_cluster: JetStreamCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The task that publishes a container's records dies (a bug): the records in flight fail,
    and so does the container; closing its data log must not raise that again, or the
    container could never be recovered."""
    from segmentstore.tier1.jetstream.publisher import Publisher

    send_more = Publisher._send_more
    armed: list[bool] = []

    async def dying(publisher: Publisher) -> None:
        if armed:
            armed.clear()
            raise RuntimeError("injected into the publisher")
        await send_more(publisher)

    monkeypatch.setattr(Publisher, "_send_more", dying)
    fast = {"recovery_retry_min_ms": 50, "recovery_retry_max_ms": 400}
    tier1 = jetstream_tier1(jetstream_cluster)
    async with SegmentStore.open(
        tmp_path / "node", tier2=(tmp_path / "tier2").as_uri(), tier1=tier1, store=fast
    ) as store:
        await store.create_segment("js/died")
        await store.append("js/died", b"kept")
        container = store.container(store.container_of("js/died"))
        armed.append(True)
        with pytest.raises(SegmentStoreError):
            await store.append("js/died", b"lost with the publisher")
        deadline = time.monotonic() + 30
        while container.status is not ContainerStatus.RUNNING:
            assert time.monotonic() < deadline, container.failure
            await asyncio.sleep(0.05)
        await store.append("js/died", b"!")
        assert bytes(await store.read("js/died", 0)) == b"kept!"
