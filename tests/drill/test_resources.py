"""The judgement of a long run's resource samples: what keeps growing fails, what levels off
or wobbles passes."""

from __future__ import annotations

import random

import pytest

from segmentstore.drill.resources import growing, parse_metrics, parse_processes


def test_a_leak_keeps_growing() -> None:
    # A consumer per read: 27 to 1,000 in five minutes.
    consumers = [27 + 3.2 * i for i in range(300)]
    assert growing(consumers, "jetstream_consumers")
    fds = [40 + i // 4 for i in range(400)]  # a descriptor every four samples
    assert growing(fds, "fds")


def test_flat_wobbling_and_levelling_off_pass() -> None:
    rng = random.Random(1)
    assert not growing([60 + rng.randint(-5, 5) for _ in range(360)], "fds")
    # A cache filling up to its bound, then flat.
    rss = [min(100 << 20, (1 << 20) * i) + (200 << 20) for i in range(360)]
    assert not growing(rss, "rss_bytes")
    # Consumers of recoveries that come and go.
    assert not growing([3 + (i % 7 == 0) * 6 for i in range(360)], "jetstream_consumers")


def test_small_growth_within_the_allowance_passes() -> None:
    assert not growing([100 + i * 0.05 for i in range(400)], "fds")  # +20 in all


@pytest.mark.parametrize("values", [[], [1.0], [1.0, 2.0, 3.0, 4.0, 5.0]])
def test_too_few_samples_are_not_judged(values: list[float]) -> None:
    assert not growing(values, "fds")


def test_unlabelled_samples_are_read_from_the_exposition() -> None:
    text = """# HELP process_open_fds Number of open file descriptors.
# TYPE process_open_fds gauge
process_open_fds 42.0
segmentstore_requests_total{route="/v1"} 5
process_resident_memory_bytes 1.2e+08
"""
    assert parse_metrics(text) == {"process_open_fds": 42.0, "process_resident_memory_bytes": 1.2e8}


def test_each_worker_of_a_node_is_a_process_of_its_own() -> None:
    text = """# TYPE process_open_fds gauge
process_open_fds{worker="w0"} 42.0
process_open_fds{worker="w1"} 40.0
segmentstore_requests_total{route="/v1",worker="w0"} 5
process_resident_memory_bytes{worker="w1"} 1.2e+08
"""
    assert parse_processes(text) == {
        "w0": {"process_open_fds": 42.0},
        "w1": {"process_open_fds": 40.0, "process_resident_memory_bytes": 1.2e8},
    }
    assert parse_metrics(text) == {}
