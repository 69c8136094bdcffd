"""The network of a spawned cluster: every link goes through a proxy of the drill's switchboard
(:mod:`.proxy`), so that a drill can partition it.

The endpoints are named ``client`` (the drill's load), the nodes ``n1``, ``n2``, ... and the
JetStream servers ``js1``, ``js2``, ``js3``. The proxies:

- client -> node: the URLs the drill's requests go to (:meth:`DrillNetwork.client_url`);
- node -> node: each node advertises a proxy in front of itself, so the requests others forward
  to it pass there (the switchboard tells the calling node by its socket);
- node -> JetStream server: each node's ``--nats`` URLs are proxies of its own, one per server;
- JetStream server -> server: every server's cluster routes name proxies, one per pair and
  direction. The servers advertise neither their client URLs to clients (``no_advertise``) nor a
  route URL that works (``advertise`` names a proxy that refuses for good), so that no client and
  no server ever finds a way around the proxies.

A link's state (``open``, ``refused``, ``black_hole``, one-way, delay) is set for both of its
directions at once, and :meth:`DrillNetwork.heal` opens every link again.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

from segmentstore.harness.jetstream_cluster import JetStreamCluster, JetStreamNode
from segmentstore.harness.store_nodes import StoreNode, StoreNodes

CLIENT = "client"
_GOSSIP = "gossip"  # the endpoint that dials the route URLs servers advertise: always refused


def jetstream_name(server: JetStreamNode) -> str:
    return "js" + server.name.removeprefix("n")


class DrillNetwork:
    def __init__(self, work_dir: Path, nodes_root: Path) -> None:
        work_dir.mkdir(parents=True, exist_ok=True)
        self.nodes_root = nodes_root
        with open(work_dir / "switchboard.log", "ab") as log:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "segmentstore.drill.proxy", str(nodes_root)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
            )
        self._lock = threading.Lock()
        self._request_lock = threading.Lock()
        self.jetstream: list[str] = []  # the servers' endpoint names
        self.nodes: list[str] = []
        self._client_urls: dict[str, str] = {}
        self._named: dict[str, str] = {}  # a proxy's host:port -> the node behind it
        self._changed: set[tuple[str, str]] = set()  # links not open
        answer = self._read()
        if not answer.get("ready"):
            raise RuntimeError(f"the drill's switchboard did not start: {answer}")

    # -- wiring ------------------------------------------------------------------------------

    def route_jetstream(self, cluster: JetStreamCluster) -> None:
        """Before the servers start: their routes, each through a proxy of its own."""
        for server in cluster.nodes:
            name = jetstream_name(server)
            self.jetstream.append(name)
            gossip = self.proxy(_GOSSIP, name, server.route_port)
            self.set(_GOSSIP, name, "refused")
            ports = [
                self.proxy(name, jetstream_name(peer), peer.route_port)
                for peer in cluster.nodes
                if peer is not server
            ]
            extra = f"no_advertise: true\n    advertise: 127.0.0.1:{gossip}"
            server.write_config(ports, cluster_extra=extra)

    def prepare_node(self, nodes: StoreNodes, node_id: str | None = None) -> StoreNode:
        """A node (new, or one that was here before, not started) whose links all pass here."""
        node = nodes.prepare(node_id)
        if node.node_id in self.nodes:
            return node
        self.nodes.append(node.node_id)
        client = self.proxy(CLIENT, node.node_id, node.port)
        self._client_urls[node.node_id] = f"http://127.0.0.1:{client}"
        peers = self.proxy(None, node.node_id, node.port)
        self._named[f"127.0.0.1:{client}"] = self._named[f"127.0.0.1:{peers}"] = node.node_id
        node.env["SEGMENTSTORE_CLUSTER__ADVERTISE_URL"] = f"http://127.0.0.1:{peers}"
        servers = node.args.index("--nats") + 1
        node.args[servers] = ",".join(
            f"nats://127.0.0.1:{self.proxy(node.node_id, name, _port(url))}"
            for name, url in zip(self.jetstream, node.args[servers].split(","), strict=True)
        )
        return node

    def client_url(self, node_id: str) -> str:
        return self._client_urls[node_id]

    def node_at(self, url: str) -> str | None:
        """The node behind a proxy's URL (a client's, or an advertised one)."""
        netloc = url.split("://", 1)[-1].split("/", 1)[0]
        return self._named.get(netloc)

    # -- faults ------------------------------------------------------------------------------

    def set(
        self,
        a: str,
        b: str,
        mode: str = "open",
        held_from: Iterable[str] = (),
        delay_ms: float = 0,
    ) -> None:
        held = sorted(held_from)
        self._request(
            {"op": "link", "a": a, "b": b, "mode": mode, "held_from": held, "delay_ms": delay_ms}
        )
        with self._lock:
            key = (min(a, b), max(a, b))
            if mode == "open" and not held and not delay_ms:
                self._changed.discard(key)
            else:
                self._changed.add(key)

    def heal(self) -> None:
        """Every link open again (the gossip sinks stay refused)."""
        with self._lock:
            changed = [key for key in self._changed if _GOSSIP not in key]
        for a, b in changed:
            self.set(a, b)

    def stats(self) -> dict[str, Any]:
        return self._request({"op": "stats"})

    # -- the switchboard ---------------------------------------------------------------------

    def proxy(self, dialer: str | None, target: str, port: int) -> int:
        command = {"op": "proxy", "dialer": dialer, "target": target, "port": port}
        return int(self._request(command)["port"])

    def _request(self, command: dict[str, Any]) -> dict[str, Any]:
        with self._request_lock:
            stdin = self._pipe(self._proc.stdin)
            stdin.write(json.dumps(command).encode() + b"\n")
            stdin.flush()
            answer = self._read()
        if "error" in answer:
            raise RuntimeError(f"the drill's switchboard refused {command}: {answer['error']}")
        return answer

    def _read(self) -> dict[str, Any]:
        line = self._pipe(self._proc.stdout).readline()
        if not line:
            raise RuntimeError("the drill's switchboard has ended (see switchboard.log)")
        answer: dict[str, Any] = json.loads(line)
        return answer

    @staticmethod
    def _pipe(pipe: IO[bytes] | None) -> IO[bytes]:
        assert pipe is not None
        return pipe

    def close(self) -> None:
        """Stop the switchboard (it ends when its commands end), by its PID if it hangs."""
        with contextlib.suppress(OSError):
            self._pipe(self._proc.stdin).close()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        with contextlib.suppress(OSError):
            self._pipe(self._proc.stdout).close()


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])
