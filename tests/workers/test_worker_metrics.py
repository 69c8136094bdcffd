"""A node of several workers in Prometheus' text format: each sample labelled with its
worker, and the workers' expositions merged so that Prometheus' own parser takes them."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from segmentstore.api.worker_metrics import labelled, merged


def exposition(requests: int, ready: int) -> bytes:
    registry = CollectorRegistry()
    counter = Counter("demo_requests", "requests", ["route"], registry=registry)
    counter.labels("/a").inc(requests)
    Gauge("demo_ready", "ready", registry=registry).set(ready)
    Histogram("demo_seconds", "latency", buckets=(0.1, 1.0), registry=registry).observe(0.5)
    return generate_latest(registry)


def test_every_sample_carries_its_worker() -> None:
    text = labelled(exposition(3, 1), "w1").decode()
    samples = [s for f in text_string_to_metric_families(text) for s in f.samples]
    assert samples and all(s.labels["worker"] == "w1" for s in samples)
    assert any(s.name == "demo_requests_total" and s.labels["route"] == "/a" for s in samples)


def test_merged_workers_parse_as_one_node() -> None:
    texts = [labelled(exposition(n, n % 2), f"w{n}") for n in range(3)]
    families = {f.name: f for f in text_string_to_metric_families(merged(texts).decode())}
    assert {"demo_requests", "demo_ready", "demo_seconds"} <= set(families)
    requests = families["demo_requests"].samples
    assert sorted((s.labels["worker"], s.value) for s in requests) == [
        ("w0", 0.0), ("w1", 1.0), ("w2", 2.0),
    ]  # fmt: skip
    buckets = [s for s in families["demo_seconds"].samples if s.name == "demo_seconds_bucket"]
    assert len(buckets) == 3 * 3  # two bounds and +Inf, per worker
    text = merged(texts).decode()
    assert text.count("# HELP demo_ready ") == 1 and text.count("# TYPE demo_ready ") == 1
