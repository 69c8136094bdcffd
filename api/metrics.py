"""Prometheus metrics at ``/metrics``, in the text exposition format written by hand.

HTTP requests are counted, and their latency kept in a histogram, per method, route template
(``/v1/segments/{name}:append``, never the raw path, so segment names cannot blow up the
number of series) and status. Container and cache figures are read from the store when
scraped, so they cost nothing between scrapes.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from segmentstore.api.schemas import PUBLIC_STATUSES, public_status
from segmentstore.containers.container import SegmentContainer
from segmentstore.store import SegmentStore

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# Seconds: from a cached read (sub-millisecond) to a long-polling tail read (up to 60 s).
LATENCY_BUCKETS = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0,
)  # fmt: skip

UNMATCHED_ROUTE = "unmatched"


@dataclass
class _Histogram:
    buckets: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BUCKETS) + 1))
    total: float = 0.0
    count: int = 0

    def observe(self, seconds: float) -> None:
        self.buckets[bisect.bisect_left(LATENCY_BUCKETS, seconds)] += 1
        self.total += seconds
        self.count += 1


class Metrics:
    """The HTTP layer's own counters (the store's figures are read at scrape time)."""

    def __init__(self) -> None:
        self._requests: dict[tuple[str, str, int], _Histogram] = {}
        self.append_bytes = 0
        self.appended_events = 0

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        key = (method, route, status)
        histogram = self._requests.get(key)
        if histogram is None:
            histogram = self._requests[key] = _Histogram()
        histogram.observe(seconds)

    def appended(self, size: int, events: int = 0) -> None:
        self.append_bytes += size
        self.appended_events += events

    def render(self, store: SegmentStore) -> str:
        lines: list[str] = []
        self._render_http(lines)
        _render_store(lines, store)
        lines.append("")
        return "\n".join(lines)

    def _render_http(self, lines: list[str]) -> None:
        _header(lines, "segmentstore_http_requests_total", "counter", "HTTP requests answered")
        for (method, route, status), histogram in sorted(self._requests.items()):
            labels = _labels(method=method, route=route, status=str(status))
            lines.append(f"segmentstore_http_requests_total{{{labels}}} {histogram.count}")
        name = "segmentstore_http_request_duration_seconds"
        _header(lines, name, "histogram", "HTTP request latency")
        for (method, route, status), histogram in sorted(self._requests.items()):
            labels = _labels(method=method, route=route, status=str(status))
            cumulative = 0
            for bound, count in zip((*LATENCY_BUCKETS, "+Inf"), histogram.buckets, strict=True):
                cumulative += count
                lines.append(f'{name}_bucket{{{labels},le="{bound}"}} {cumulative}')
            lines.append(f"{name}_sum{{{labels}}} {histogram.total:.6f}")
            lines.append(f"{name}_count{{{labels}}} {histogram.count}")
        _header(lines, "segmentstore_append_bytes_total", "counter", "bytes appended over HTTP")
        lines.append(f"segmentstore_append_bytes_total {self.append_bytes}")
        _header(lines, "segmentstore_appended_events_total", "counter", "events appended")
        lines.append(f"segmentstore_appended_events_total {self.appended_events}")


def _render_store(lines: list[str], store: SegmentStore) -> None:
    containers = list(store.containers)
    _header(lines, "segmentstore_container_status", "gauge", "1 for the container's status")
    for c in containers:
        now = public_status(c)
        for status in PUBLIC_STATUSES:
            labels = _labels(container=str(c.id), status=status)
            lines.append(f"segmentstore_container_status{{{labels}}} {int(status == now)}")
    gauges: tuple[tuple[str, str, str, Callable[[SegmentContainer], int]], ...] = (
        ("epoch", "gauge", "the container's epoch", lambda c: c.epoch),
        ("segments", "gauge", "segments held", lambda c: c.segment_count),
        ("tier1_bytes", "gauge", "bytes in Tier 1", lambda c: c.tier1_bytes),
        ("tier2_lag_bytes", "gauge", "bytes not yet in Tier 2", lambda c: c.tier2_lag_bytes),
        ("last_sequence", "counter", "last operation sequence", lambda c: c.last_sequence),
        (
            "retention_lag_ms",
            "gauge",
            "how long ago the oldest stored append should have expired (time retention)",
            lambda c: c.retention_lag_ms,
        ),
        (
            "retention_truncated_bytes",
            "counter",
            "bytes truncated by retention policies",
            lambda c: c.retention_truncated_bytes,
        ),
    )
    for suffix, kind, help_text, value in gauges:
        name = f"segmentstore_container_{suffix}"
        _header(lines, name, kind, help_text)
        for c in containers:
            lines.append(f"{name}{{{_labels(container=str(c.id))}}} {value(c)}")
    stats = store.cache_manager.stats
    for name, kind, help_text, number in (
        ("segmentstore_cache_used_bytes", "gauge", "cache bytes in use", stats.used_bytes),
        ("segmentstore_cache_max_bytes", "gauge", "cache capacity", stats.max_bytes),
        ("segmentstore_cache_evictions_total", "counter", "cache evictions", stats.evictions),
    ):
        _header(lines, name, kind, help_text)
        lines.append(f"{name} {number}")


def _header(lines: list[str], name: str, kind: str, help_text: str) -> None:
    lines.append(f"# HELP {name} {help_text}")
    lines.append(f"# TYPE {name} {kind}")


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(**labels: str) -> str:
    return ",".join(f'{key}="{_escape(value)}"' for key, value in labels.items())


def route_template(scope: Scope) -> str:
    route = scope.get("route")
    template = getattr(route, "path_format", None)
    return template if isinstance(template, str) else UNMATCHED_ROUTE


class MetricsMiddleware:
    """Times every HTTP request, including those that auth or the body limit refuse."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # if the app raises, the last-resort handler outside answers 500

        async def recording_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, recording_send)
        finally:
            elapsed = time.perf_counter() - started
            self.metrics.observe(scope["method"], route_template(scope), status, elapsed)
