"""The server answers probes while its containers recover a long Tier 1 tail.

A data directory is filled through the embedded store with many appends and no checkpoint
after the first, so a restart must replay all of them. ``segmentstore serve`` over it binds
its port first: ``/healthz`` is 200 at once, ``/readyz`` is 503 with the recovering containers
listed, a request to a recovering container is ``503 container_unavailable`` with
``Retry-After``, and once recovery ends ``/readyz`` is 200 and every byte is there.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import httpx
import pytest

from segmentstore import SegmentStore
from segmentstore.contracts.mapping import container_of
from segmentstore.harness.served_store import ServedStore

SEGMENT = "probes/long-tail"
HOME = container_of(SEGMENT, 4)
APPENDS = 60_000
RECORD = b"r" * 200
TIMEOUT_S = 120.0

pytestmark = [pytest.mark.integration, pytest.mark.slow]


async def _fill(data_dir: Path) -> int:
    never = 1 << 40  # no checkpoint, no Tier 2 flush: the whole tail is replayed
    async with SegmentStore.open(
        data_dir,
        containers=4,
        durable_log={"checkpoint_every_frames": never, "checkpoint_every_bytes": never},
        storage_writer={"flush_interval_ms": 3_600_000, "flush_threshold_bytes": never},
    ) as store:
        await store.create_segment(SEGMENT)
        for _ in range(APPENDS // 1000):
            await asyncio.gather(*(store.append(SEGMENT, RECORD) for _ in range(1000)))
        return (await store.get_info(SEGMENT)).length


def test_probes_answer_while_containers_recover(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    length = asyncio.run(_fill(data_dir))
    served = ServedStore(data_dir, tmp_path / "serve.log", environ=os.environ)
    try:
        assert served._port_known.wait(TIMEOUT_S) and served.port, served.log()
        seen: dict[str, object] = {}
        deadline = time.monotonic() + TIMEOUT_S
        with httpx.Client(base_url=served.url, timeout=10) as http:
            while time.monotonic() < deadline:
                health = http.get("/healthz")
                assert health.status_code == 200
                seen.setdefault("healthz", health.json())
                ready = http.get("/readyz")
                if ready.status_code == 200:
                    seen["ready"] = ready.json()
                    break
                assert ready.status_code == 503
                assert int(ready.headers["Retry-After"]) >= 1
                error = ready.json()["error"]
                assert error["code"] == "container_unavailable"
                statuses = {c["id"]: c["status"] for c in error["containers"]}
                if statuses.get(HOME) == "recovering":
                    seen["recovering"] = statuses
                    info = http.get(f"/v1/segments/{SEGMENT}")
                    if info.status_code == 503:
                        seen["unavailable"] = info
                time.sleep(0.005)
            assert "ready" in seen, f"not ready in {TIMEOUT_S} s:\n{served.log()}"
            assert "recovering" in seen, (
                f"never saw the segment's container recovering:\n{served.log()}"
            )
            unavailable = seen.get("unavailable")
            assert isinstance(unavailable, httpx.Response), "no request met the recovery"
            assert unavailable.json()["error"]["code"] == "container_unavailable"
            assert int(unavailable.headers["Retry-After"]) >= 1
            assert http.get(f"/v1/segments/{SEGMENT}").json()["length"] == length
            tail = http.get(f"/v1/segments/{SEGMENT}:read", params={"offset": length - 200})
            assert tail.content == RECORD
    finally:
        assert served.stop() == 0 or served.proc.returncode is not None
