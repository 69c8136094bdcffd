"""Which worker owns which container, and the names workers go by."""

from __future__ import annotations

import pytest

from segmentstore.contracts.members import node_of, parse_worker_id, worker_id, worker_name
from segmentstore.workers.share import share_of, worker_of


@pytest.mark.parametrize(("workers", "containers"), [(1, 4), (2, 4), (3, 4), (4, 4), (2, 16)])
def test_every_container_has_exactly_one_worker(workers: int, containers: int) -> None:
    shares = [share_of(w, workers, containers) for w in range(workers)]
    assert sorted(c for share in shares for c in share) == list(range(containers))
    for w, share in enumerate(shares):
        assert all(worker_of(c, workers) == w for c in share)
    sizes = [len(share) for share in shares]
    assert max(sizes) - min(sizes) <= 1  # as even as the counts allow


def test_worker_ids_name_their_node_and_index() -> None:
    assert worker_name(3) == "w3"
    assert worker_id("pod-0", 1) == "pod-0/w1"
    assert parse_worker_id("pod-0/w1") == ("pod-0", 1)
    assert parse_worker_id(worker_id("a/b", 12)) == ("a/b", 12)
    for plain in ("pod-0", "pod-0/w", "pod-0/wx", "/w1x", "w1"):
        assert parse_worker_id(plain) is None, plain
        assert node_of(plain) == plain
    assert node_of("pod-0/w1") == "pod-0"
