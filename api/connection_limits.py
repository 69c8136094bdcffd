"""How many client connections a node keeps open: in all, and from one client address.

Every connection holds a descriptor, and a node has only so many (``RLIMIT_NOFILE``): without a
cap, thousands of idle or slow connections could take them all, and the node could then open
neither a Tier 1 file nor a connection to JetStream or another node. A connection past either
cap is answered ``429 throttled`` with ``Retry-After`` as soon as it is accepted, and closed;
the cap on one address keeps a single client (or attacker) from taking every slot of the
node's.

The node's cap is lowered at start to what its descriptor limit leaves after a reserve for its
own files and connections (:func:`descriptor_budget`), so that the cap always holds below it.
The figures are exported for ``/metrics`` (:class:`ConnectionLimitsCollector`).
"""

from __future__ import annotations

import logging
import resource
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

log = logging.getLogger(__name__)

# Of the descriptors a node may open, those kept for everything but client connections: Tier 1
# files, JetStream, connections to other nodes, Tier 2 reads.
_RESERVE_FRACTION = 4
_MIN_RESERVE = 256


def descriptor_budget(wanted: int) -> int:
    """``wanted`` client connections, or fewer if the process' descriptor limit would not
    leave its reserve for everything else."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return wanted
    allowed = max(1, soft - max(_MIN_RESERVE, soft // _RESERVE_FRACTION))
    if allowed < wanted:
        log.warning(
            "at most %d client connections (api.max_connections is %d): the process may open"
            " %d descriptors and keeps the rest for its files and its own connections",
            allowed, wanted, soft,
        )  # fmt: skip
    return min(wanted, allowed)


class ConnectionLimits:
    """The connections open now, per client address, and those refused (the event loop's
    only: protocols are made and lost on it)."""

    def __init__(self, max_connections: int, max_per_client: int) -> None:
        self.max_connections = max_connections
        self.max_per_client = max_per_client
        self.open = 0
        self._by_client: dict[str, int] = {}
        self.refused = {"node": 0, "client": 0}

    def admit(self, client: str) -> str | None:
        """Take a slot for a connection from ``client``; None if it may stay, else which cap
        it met (``node`` or ``client``), counted."""
        if self.open >= self.max_connections:
            self.refused["node"] += 1
            return "node"
        held = self._by_client.get(client, 0)
        if held >= self.max_per_client:
            self.refused["client"] += 1
            return "client"
        self.open += 1
        self._by_client[client] = held + 1
        return None

    def release(self, client: str) -> None:
        self.open -= 1
        left = self._by_client[client] - 1
        if left:
            self._by_client[client] = left
        else:
            del self._by_client[client]


class ConnectionLimitsCollector(Collector):
    def __init__(self, limits: ConnectionLimits) -> None:
        self.limits = limits

    def collect(self) -> Iterator[Metric]:
        limits = self.limits
        yield GaugeMetricFamily(
            "segmentstore_http_connections_open", "client connections open now", limits.open
        )
        yield GaugeMetricFamily(
            "segmentstore_http_connections_limit",
            "client connections the node keeps open at most (api.max_connections, or fewer"
            " if its descriptor limit is lower)",
            limits.max_connections,
        )
        refused = CounterMetricFamily(
            "segmentstore_http_connections_refused",
            "connections answered 429 and closed: the node's cap (node) or one address's"
            " (client) was reached",
            labels=["cap"],
        )
        for cap, count in limits.refused.items():
            refused.add_metric([cap], count)
        yield refused
