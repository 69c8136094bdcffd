"""A worker's place in its node: what the supervisor hands each worker it starts."""

from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import Any

from segmentstore.contracts.members import worker_id, worker_name
from segmentstore.settings import Settings
from segmentstore.workers.board import Board
from segmentstore.workers.share import share_of


@dataclass(frozen=True)
class WorkerPlace:
    index: int
    count: int
    node_id: str
    # The node's port, which every worker accepts on (one listening socket, shared), and this
    # worker's own, published in the node's map.
    node_socket: socket.socket
    own_socket: socket.socket
    urls: tuple[str, ...]  # every worker's own URL, by index
    # Names this node's hand-off sockets (abstract Unix addresses) apart from any other's.
    run_id: str
    # Signs the requests one worker passes to another (as a cluster's secret does between
    # nodes); made by the supervisor, never written anywhere.
    secret: bytes
    board: Board

    @property
    def name(self) -> str:
        return worker_name(self.index)

    @property
    def id(self) -> str:
        return worker_id(self.node_id, self.index)

    @property
    def url(self) -> str:
        return self.urls[self.index]

    @property
    def node_port(self) -> int:
        return int(self.node_socket.getsockname()[1])

    @property
    def own_port(self) -> int:
        return int(self.own_socket.getsockname()[1])

    def share(self, containers: int) -> frozenset[int]:
        """The containers this worker owns on a single node."""
        return share_of(self.index, self.count, containers)

    def settings_of_worker(self, settings: Settings) -> Settings:
        """This worker's settings, from the node's: its share of the cache (``cache.max_bytes``
        bounds the node, not each process), and in a cluster a member's identity of its own
        (``NODE/wI`` at its own address: leases of its own)."""
        cache = settings.cache
        least = settings.store.max_append_bytes + cache.block_bytes  # one maximal append fits
        overrides: dict[str, dict[str, Any]] = {
            "cache": {"max_bytes": max(cache.max_bytes // self.count, least)}
        }
        if settings.cluster.enabled:
            overrides["cluster"] = {"node_id": self.id, "advertise_url": self.url}
        return settings.with_overrides(**overrides)

    def handoff_address(self, index: int) -> bytes:
        """The abstract Unix address at which worker ``index`` takes connections handed to it."""
        return f"\0segmentstore/{self.run_id}/w{index}".encode()

    def relay_address(self, index: int) -> bytes:
        """The abstract Unix address at which worker ``index`` serves the requests its siblings
        relay to it."""
        return f"\0segmentstore/{self.run_id}/w{index}/relay".encode()
