"""The HTTP API over Tier 1 on JetStream while JetStream nodes die under load.

A ``segmentstore serve`` process with ``--tier1 jetstream`` takes appends from concurrent
writers (exactly-once ids, retrying on 503). A follower, then the stream leader of a container,
is SIGKILLed and restarted. Appends during the leader election answer 503
``container_unavailable`` with ``Retry-After``, never a 500 and never a hang past the client's
timeout, and every acknowledged append is found byte for byte afterwards.
"""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from segmentstore.harness.jetstream_cluster import JetStreamCluster
from segmentstore.harness.served_store import ServedStore

WRITERS = 8


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JetStreamCluster]:
    with JetStreamCluster.running(tmp_path_factory.mktemp("http-jetstream")) as cluster:
        yield cluster


class Writers:
    def __init__(self, url: str) -> None:
        self.url = url
        self.acked: dict[str, list[tuple[int, bytes]]] = {}
        self.statuses: Counter[int] = Counter()
        self.probes: Counter[int] = Counter()
        self.bad: list[str] = []
        self._stop = asyncio.Event()
        self.tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self.tasks = [asyncio.create_task(self._write(w)) for w in range(WRITERS)]
        self.tasks.append(asyncio.create_task(self.probe()))

    async def _write(self, writer: int) -> None:
        segment = f"js/writer-{writer}"
        acked = self.acked.setdefault(segment, [])
        async with httpx.AsyncClient(base_url=self.url, timeout=45) as http:
            assert (await http.put(f"/v1/segments/{segment}")).status_code == 201
            seq = 0
            while not self._stop.is_set():
                payload = f"{writer}:{seq}|".encode() * 40
                answer = await http.post(
                    f"/v1/segments/{segment}:append",
                    content=payload,
                    headers={"Writer-Id": f"w{writer}", "Writer-Seq": str(seq)},
                )
                self.statuses[answer.status_code] += 1
                if answer.status_code == 200:
                    body = answer.json()
                    if not body.get("duplicate"):
                        acked.append((body["offset"], payload))
                    seq += 1
                elif answer.status_code == 503:
                    error = answer.json()["error"]
                    if (
                        error["code"] != "container_unavailable"
                        or "retry-after" not in answer.headers
                    ):
                        self.bad.append(f"503 without its shape: {answer.headers} {error}")
                    await asyncio.sleep(0.2)  # the same seq again: exactly once
                else:
                    self.bad.append(f"{answer.status_code}: {answer.text[:200]}")
                    return

    def _check_503(self, answer: httpx.Response) -> None:
        error = answer.json()["error"]
        if error["code"] != "container_unavailable" or "retry-after" not in answer.headers:
            self.bad.append(f"503 without its shape: {answer.headers} {error}")

    async def probe(self) -> None:
        """An append every 50 ms, each on its own, so that some arrive during a stall."""
        segment = "js/probe"
        acked = self.acked.setdefault(segment, [])
        async with httpx.AsyncClient(base_url=self.url, timeout=45) as http:
            await http.put(f"/v1/segments/{segment}")

            async def one(number: int) -> None:
                payload = f"probe {number}|".encode()
                answer = await http.post(f"/v1/segments/{segment}:append", content=payload)
                self.probes[answer.status_code] += 1
                if answer.status_code == 200:
                    acked.append((answer.json()["offset"], payload))
                elif answer.status_code == 503:
                    self._check_503(answer)
                else:
                    self.bad.append(f"probe {answer.status_code}: {answer.text[:200]}")

            pending = set()
            for number in range(1_000_000):
                if self._stop.is_set():
                    break
                pending.add(asyncio.create_task(one(number)))
                await asyncio.sleep(0.05)
            await asyncio.gather(*pending)

    async def stop(self) -> None:
        self._stop.set()
        await asyncio.gather(*self.tasks)


@pytest.mark.slow
@pytest.mark.integration
async def test_appends_survive_jetstream_node_kills_with_503s_in_the_stall(
    cluster: JetStreamCluster, tmp_path: Path
) -> None:
    prefix = f"http{os.getpid()}"
    served = ServedStore(
        tmp_path / "data",
        tmp_path / "serve.log",
        {
            "SEGMENTSTORE_TIER1__MODE": "jetstream",
            "SEGMENTSTORE_TIER1__JETSTREAM__SERVERS": ",".join(cluster.servers),
            "SEGMENTSTORE_TIER1__JETSTREAM__STREAM_PREFIX": prefix,
            "SEGMENTSTORE_TIER1__JETSTREAM__ACK_TIMEOUT_MS": "2000",
            "SEGMENTSTORE_STORE__CONTAINERS": "1",
        },
        environ=os.environ,
    )
    try:
        await asyncio.to_thread(served.wait_ready, 60)
        writers = Writers(served.url)
        writers.start()
        stream = f"{prefix}-container-0"
        for role in ("follower", "leader"):
            await asyncio.sleep(2)
            leader = await cluster.stream_leader(stream)
            victim = (
                leader
                if role == "leader"
                else next(n.name for n in cluster.nodes if n.name != leader)
            )
            cluster.node(victim).sigkill()
            # A leader's election takes 5-10 s; a follower's death costs nothing.
            await asyncio.sleep(12 if role == "leader" else 3)
            cluster.node(victim).start()
            await cluster.ready()
        await asyncio.sleep(1)
        await writers.stop()
        print(f"answers: writers {dict(writers.statuses)}, probes {dict(writers.probes)}")
        assert writers.bad == []
        assert writers.statuses[503] + writers.probes[503] > 0, "no append met the election"
        async with httpx.AsyncClient(base_url=served.url, timeout=30) as http:
            for segment, acked in writers.acked.items():
                data = (await http.get(f"/v1/segments/{segment}:read?offset=0")).content
                for offset, payload in acked:
                    assert data[offset : offset + len(payload)] == payload, (segment, offset)
        assert sum(len(a) for a in writers.acked.values()) > 200
    finally:
        served.stop()
