"""Prometheus metrics at ``/metrics``, on ``prometheus_client`` with one registry per app.

Names follow Prometheus' rules: counters end in ``_total``, durations are in seconds and sizes
in bytes, ``process_*`` describes the process and ``segmentstore_build_info`` the build.

- HTTP: every request is counted, and timed in a histogram, per method, route template
  (``/v1/segments/{name}:append``, never the raw path, so segment names cannot blow up the
  number of series) and status. Requests refused before routing (auth, body limits) are
  labelled with the template their path matches; only a path that matches no route is
  ``unmatched``. The answers that are bugs (a ``5xx`` other than ``503`` and ``507``) are also
  counted per method and route in a family of their own whose every route's series exists
  from the start, at zero: Prometheus' ``increase()`` cannot count an error that a series
  begins with, and the alert must see the first one.
- ``segmentstore_build_info`` names the node (its cluster id, or the host's name), so that
  the series of one instance can be matched to the node the cluster map shows.
- The store's work, reported through its :class:`~segmentstore.observations.Observations`:
  Tier 1 write+sync latency, Tier 2 chunk write latency and size, container recovery time.
- Container and cache figures, read from the store when scraped (:mod:`.store_collector`), so
  they cost nothing between scrapes.
"""

from __future__ import annotations

import platform
from collections.abc import Sequence

from prometheus_client import (
    CollectorRegistry,
    Histogram,
    Info,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from starlette.routing import BaseRoute, Match
from starlette.types import Scope

from segmentstore.api.loop_metrics import LoopHistogram, LoopMetricsCollector
from segmentstore.api.process_collector import ProcessExtrasCollector
from segmentstore.api.store_collector import StoreCollector
from segmentstore.observations import StoreObserver
from segmentstore.store import SegmentStore
from segmentstore.version import VERSION

CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4

# Seconds: from a cached read (sub-millisecond) to a long-polling tail read (up to 60 s).
LATENCY_BUCKETS = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0,
)  # fmt: skip
# Seconds: a grouped fdatasync takes tens of microseconds to tens of milliseconds here.
TIER1_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
)  # fmt: skip
# Seconds: a local file write to an S3 upload of a 64 MiB chunk.
TIER2_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
# Bytes: 4 KiB to 64 MiB by powers of four.
SIZE_BUCKETS = tuple(float(4096 << (2 * i)) for i in range(8))
# Seconds: an empty container to a long Tier 1 tail.
RECOVERY_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)

UNMATCHED_ROUTE = "unmatched"
_HTTP_LABELS = ("method", "route", "status")

# A ``_created`` series beside every counter and histogram doubles what is scraped and stored;
# Prometheus' text format needs none (process_start_time_seconds says when counting began).
disable_created_metrics()  # type: ignore[no-untyped-call]


def is_internal_error(status: str) -> bool:
    """A ``5xx`` that no documented error answers (``503`` and ``507`` are documented)."""
    return status.startswith("5") and status not in ("503", "507")


class Metrics(StoreObserver):
    """The service's metrics; observes the store it is attached to. ``node`` names this node
    in ``segmentstore_build_info``."""

    def __init__(self, node: str = "") -> None:
        self.registry = registry = CollectorRegistry()
        ProcessCollector(registry=registry)
        PlatformCollector(registry=registry)
        registry.register(ProcessExtrasCollector())
        Info("segmentstore_build", "the running build", registry=registry).info(
            {"version": VERSION, "python": platform.python_version(), "node": node}
        )
        # Updated on the event loop for every request and every Tier 1 record: lock-free.
        self._latency: dict[tuple[str, ...], LoopHistogram] = {}
        self._routes: list[tuple[str, str]] = []  # (method, template) of every route
        self._append_bytes = 0
        self._appended_events = 0
        self._tier1 = LoopHistogram(TIER1_BUCKETS)
        loop = LoopMetricsCollector()
        loop.add_counter(
            "segmentstore_http_requests",
            "HTTP requests answered",
            _HTTP_LABELS,
            lambda: {key: sum(h.counts) for key, h in self._latency.items()},
        )
        loop.add_counter(
            "segmentstore_http_internal_errors",
            "answers that are bugs: 5xx other than 503 and 507 (each route at zero from the start)",
            ("method", "route"),
            self._internal_errors,
        )
        loop.add_histogram(
            "segmentstore_http_request_duration_seconds",
            "HTTP request latency, from the first byte in to the last byte out",
            _HTTP_LABELS,
            lambda: dict(self._latency),
        )
        loop.add_counter(
            "segmentstore_append_bytes",
            "bytes appended over HTTP",
            (),
            lambda: {(): self._append_bytes},
        )
        loop.add_counter(
            "segmentstore_appended_events",
            "events appended over HTTP",
            (),
            lambda: {(): self._appended_events},
        )
        loop.add_histogram(
            "segmentstore_tier1_write_duration_seconds",
            "Tier 1 write and sync of one record (a frame of appends), queueing included",
            (),
            lambda: {(): self._tier1},
        )
        registry.register(loop)
        # Reported from Tier 2 writer threads, or rarely: prometheus_client's own (locked).
        self._tier2 = Histogram(
            "segmentstore_tier2_write_duration_seconds",
            "one chunk write of a Storage Writer flush to Tier 2",
            buckets=TIER2_BUCKETS,
            registry=registry,
        )
        self._tier2_bytes = Histogram(
            "segmentstore_tier2_write_bytes",
            "the size of one chunk write of a Storage Writer flush to Tier 2",
            buckets=SIZE_BUCKETS,
            registry=registry,
        )
        self._recovery = Histogram(
            "segmentstore_container_recovery_duration_seconds",
            "how long a container took to recover (replay, reconcile, checkpoint)",
            ["container"],
            buckets=RECOVERY_BUCKETS,
            registry=registry,
        )

    def watch(self, store: SegmentStore) -> None:
        """Report ``store``'s figures: its work as it happens, its state when scraped."""
        store.observations.add(self)
        self.registry.register(StoreCollector(store))
        # Every container's recovery series from the start, at zero: Prometheus' increase()
        # cannot count the recovery already in a series' first sample (an alert would miss a
        # slow first recovery, or the first takeover of a container by this node).
        for container in range(store.settings.store.containers):
            self._recovery.labels(str(container))

    def expect_routes(self, routes: Sequence[BaseRoute]) -> None:
        """Export the internal-error series of every method and template of ``routes`` (and
        of a path that matches none) from now on, at zero."""
        found = {("GET", UNMATCHED_ROUTE), ("POST", UNMATCHED_ROUTE)}
        for route in routes:
            template = getattr(route, "path_format", None)
            for method in getattr(route, "methods", None) or ():
                if isinstance(template, str) and method != "HEAD":
                    found.add((method, template))
        self._routes = sorted(found)

    def _internal_errors(self) -> dict[tuple[str, ...], float]:
        errors: dict[tuple[str, ...], float] = dict.fromkeys(self._routes, 0)
        for (method, route, status), histogram in self._latency.items():
            if is_internal_error(status):
                errors[(method, route)] = errors.get((method, route), 0) + sum(histogram.counts)
        return errors

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        """One HTTP request answered (on the event loop)."""
        self.histogram(method, route, status).observe(seconds)

    def histogram(self, method: str, route: str, status: int) -> LoopHistogram:
        """The latency histogram of one series, for a caller that keeps it rather than look
        it up by its labels for every request (a data route); updated on the loop only."""
        key = (method, route, str(status))
        histogram = self._latency.get(key)
        if histogram is None:
            histogram = self._latency[key] = LoopHistogram(LATENCY_BUCKETS)
        return histogram

    def appended(self, size: int, events: int = 0) -> None:
        """Bytes and events appended over HTTP (on the event loop)."""
        self._append_bytes += size
        self._appended_events += events

    def render(self) -> bytes:
        return generate_latest(self.registry)

    # -- StoreObserver --------------------------------------------------------------------

    def tier1_written(self, seconds: float) -> None:
        self._tier1.observe(seconds)

    def tier2_written(self, seconds: float, size: int) -> None:
        self._tier2.observe(seconds)
        self._tier2_bytes.observe(size)

    def recovered(self, container: int, seconds: float) -> None:
        self._recovery.labels(str(container)).observe(seconds)


def route_template(scope: Scope, routes: Sequence[BaseRoute]) -> str:
    """The template of the route that answered, or else of the route the path matches."""
    template = getattr(scope.get("route"), "path_format", None)
    if isinstance(template, str):
        return template
    # Refused before routing (auth, body limit, path checks): find the route it was for.
    partial = None
    for route in routes:
        match, _ = route.matches(scope)
        path_format = getattr(route, "path_format", None)
        if match is Match.FULL and isinstance(path_format, str):
            return path_format
        if match is Match.PARTIAL and partial is None and isinstance(path_format, str):
            partial = path_format  # the path matches, the method does not: 405
    return partial or UNMATCHED_ROUTE
