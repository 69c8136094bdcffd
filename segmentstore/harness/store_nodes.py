"""Segment store cluster nodes as local processes: ``segmentstore serve --cluster`` on free
loopback ports, over a JetStream cluster and a shared Tier 2, for benchmarks and drills that
kill and restart them. Every process is stopped by its PID."""

from __future__ import annotations

import contextlib
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import httpx

from segmentstore.loopback import free_port


class StoreNode:
    """One node; its log goes to ``<root>/<node_id>.log``; ``env`` is its whole environment."""

    def __init__(self, node_id: str, root: Path, args: list[str], env: dict[str, str]) -> None:
        self.node_id = node_id
        self.root = root
        self.args = args
        self.env = env
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.paused = False  # SIGSTOPped: running, but answering nothing

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def alive(self) -> bool:
        """Running and not paused: a node that can answer."""
        return self.proc is not None and self.proc.poll() is None and not self.paused

    def start(self) -> None:
        command = [sys.executable, "-m", "segmentstore.cli", "serve", *self.args]
        command += ["--node-id", self.node_id, "--port", str(self.port), "--host", "127.0.0.1"]
        command += ["--data-dir", str(self.root / self.node_id)]
        self.paused = False
        with open(self.root / f"{self.node_id}.log", "ab") as log:
            self.proc = subprocess.Popen(
                command, env=self.env, stdin=subprocess.DEVNULL, stdout=log, stderr=log
            )

    def sigkill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)

    def pause(self) -> None:
        """SIGSTOP: the node keeps its sockets and memory but does nothing, as a node in a
        long garbage collection or on a frozen VM would; its leases run out meanwhile."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGSTOP)
            self.paused = True

    def resume(self) -> None:
        if self.proc is not None and self.paused:
            self.proc.send_signal(signal.SIGCONT)
        self.paused = False

    def stop(self, timeout_s: float = 30) -> None:
        self.resume()  # a stopped process would not act on SIGTERM
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class StoreNodes:
    """Nodes ``n1``, ``n2``, ... sharing ``nats`` (JetStream URLs) and ``tier2_uri``."""

    def __init__(
        self,
        root: Path,
        nats: list[str],
        tier2_uri: str,
        *,
        prefix: str,
        containers: int,
        parent_env: Mapping[str, str],
        env: dict[str, str] | None = None,
    ) -> None:
        """``parent_env`` is the caller's environment (the composition root's to read): the
        nodes get it without its ``SEGMENTSTORE_`` settings, plus ``env``."""
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.args = [
            "--tier1", "jetstream", "--nats", ",".join(nats), "--tier2", tier2_uri,
            "--containers", str(containers), "--cluster", "--log-level", "info",
        ]  # fmt: skip
        self.env = {
            "SEGMENTSTORE_TIER1__JETSTREAM__STREAM_PREFIX": prefix,
            # The nodes' shared secret: only they act as members of this cluster.
            "SEGMENTSTORE_CLUSTER__SECRET": secrets.token_hex(16),
            **(env or {}),
        }
        inherited = {k: v for k, v in parent_env.items() if not k.startswith("SEGMENTSTORE_")}
        self._node_env = {**inherited, **self.env}
        self.containers = containers
        self.nodes: dict[str, StoreNode] = {}

    def add(self, node_id: str | None = None) -> StoreNode:
        node = self.prepare(node_id)
        node.start()
        return node

    def prepare(self, node_id: str | None = None) -> StoreNode:
        """The node ``node_id`` (the next free id by default), not started: a caller may
        still change its own copy of the arguments and environment."""
        node_id = node_id or f"n{len(self.nodes) + 1}"
        node = self.nodes.get(node_id)
        if node is None:
            node = StoreNode(node_id, self.root, list(self.args), dict(self._node_env))
        self.nodes[node_id] = node
        return node

    @property
    def live(self) -> list[StoreNode]:
        return [node for node in self.nodes.values() if node.alive]

    def owners(self, url: str | None = None) -> dict[int, str | None]:
        """container -> owner id, as ``url`` (default: the first live node) sees it."""
        answer = httpx.get(f"{url or self.live[0].url}/v1/cluster", timeout=5).json()
        return {c["id"]: c["owner"] for c in answer["containers"]}

    def settled(self) -> bool:
        return unsettled({node.node_id: node.url for node in self.live}) is None

    def wait_settled(self, timeout_s: float = 120, poll_s: float = 0.05) -> float:
        """Seconds until :meth:`settled`; ``TimeoutError`` after ``timeout_s``."""
        started = time.monotonic()
        while not self.settled():
            if time.monotonic() - started > timeout_s:
                raise TimeoutError(f"the cluster did not settle in {timeout_s} s (see {self.root})")
            time.sleep(poll_s)
        return time.monotonic() - started

    def stop(self) -> None:
        for node in self.nodes.values():
            with contextlib.suppress(Exception):
                node.stop()


def unsettled(nodes: Mapping[str, str]) -> str | None:
    """Why the cluster of the live ``nodes`` (id -> URL) has not settled yet, or None once it
    has: every node ready, and every node seeing the same map, in which the live nodes are all
    the nodes, every container is held by one of them, and their shares differ by at most one
    (a node that rejoined has got its containers back)."""
    live = set(nodes)
    maps: list[dict[int, str | None]] = []
    try:
        for node_id, url in nodes.items():
            if httpx.get(f"{url}/readyz", timeout=5).status_code != 200:
                return f"{node_id} is not ready"
            view = httpx.get(f"{url}/v1/cluster", timeout=5).json()
            if {n["id"] for n in view["nodes"]} != live:
                return f"{node_id} sees the nodes {[n['id'] for n in view['nodes']]}"
            owners = {c["id"]: c["owner"] for c in view["containers"]}
            if any(owner not in live for owner in owners.values()):
                return f"{node_id} sees owners {owners}"
            shares = [list(owners.values()).count(n) for n in live]
            if max(shares) - min(shares) > 1:
                return f"{node_id} sees shares {shares}"
            maps.append(owners)
    except httpx.HTTPError as error:
        return repr(error)
    if any(owners != maps[0] for owners in maps):
        return f"the nodes' maps differ: {maps}"
    return None
