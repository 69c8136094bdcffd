"""A worker's place in its node: what the supervisor hands each worker it starts."""

from __future__ import annotations

import socket
from dataclasses import dataclass

from segmentstore.workers.board import Board
from segmentstore.workers.share import share_of, worker_id, worker_name


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

    def handoff_address(self, index: int) -> bytes:
        """The abstract Unix address at which worker ``index`` takes connections handed to it."""
        return f"\0segmentstore/{self.run_id}/w{index}".encode()
