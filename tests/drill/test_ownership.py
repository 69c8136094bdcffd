"""The check that no node acknowledged an append after it had been fenced out of the container,
on made-up timelines: it finds such an append, and lets the legitimate ones be."""

from __future__ import annotations

from pathlib import Path

from segmentstore.contracts.mapping import container_of
from segmentstore.drill.ownership import Claim, OwnershipSampler
from segmentstore.harness.store_nodes import StoreNodes

CONTAINERS = 4
SEGMENT = "drill/segment-000"
URLS = {"127.0.0.1:1001": "n1", "127.0.0.1:1002": "n2"}


def _sampler(tmp_path: Path, claims: list[tuple[float, str, int | None]]) -> OwnershipSampler:
    nodes = StoreNodes(tmp_path, [], "file:///x", prefix="t", containers=CONTAINERS, parent_env={})
    sampler = OwnershipSampler(nodes, interval_s=0.25)
    container = container_of(SEGMENT, CONTAINERS)
    sampler.claims[container] = [Claim(at, node, epoch) for at, node, epoch in claims]
    return sampler


def _node_at(url: str) -> str | None:
    return URLS.get(url.split("://", 1)[-1].split("/", 1)[0])


def _stale(sampler: OwnershipSampler, *answers: tuple[str, str | None, float, float]) -> list[str]:
    answered = {SEGMENT: {(1, i): answer for i, answer in enumerate(answers)}}
    return sampler.stale_acknowledgements(answered, CONTAINERS, _node_at)


# n1 serves the container at epoch 3 until n2 takes it over at epoch 4 (seen at t=10).
HANDOVER = [(t / 4, "n1", 3) for t in range(40)] + [(10.0 + t / 4, "n2", 4) for t in range(40)]


def test_an_append_the_fenced_out_owner_acknowledged_after_the_takeover_is_found(
    tmp_path: Path,
) -> None:
    found = _stale(_sampler(tmp_path, HANDOVER), ("http://127.0.0.1:1001/x", None, 12.0, 12.1))
    assert len(found) == 1
    assert "acknowledged by n1 (epoch at most 3)" in found[0] and "epoch 4" in found[0]


def test_appends_sent_before_the_takeover_or_to_the_new_owner_are_not_stale(
    tmp_path: Path,
) -> None:
    sampler = _sampler(tmp_path, HANDOVER)
    # Sent to n1 before n2 was seen serving (its answer may come later: it was in the log
    # n2 recovered from), and sent after, to n2 itself.
    assert not _stale(
        sampler,
        ("http://127.0.0.1:1001/x", None, 9.9, 11.0),
        ("http://127.0.0.1:1002/x", None, 12.0, 12.1),
    )


def test_an_append_forwarded_to_the_owner_counts_as_the_owners(tmp_path: Path) -> None:
    sampler = _sampler(tmp_path, HANDOVER)
    # Sent to n1 after the takeover, but n1 forwarded it and n2 (Segment-Owner) answered.
    assert not _stale(sampler, ("http://127.0.0.1:1001/x", "http://127.0.0.1:1002", 12.0, 12.1))
    # The other way round: n2 forwarded it to n1, which was no longer the owner.
    found = _stale(sampler, ("http://127.0.0.1:1002/x", "http://127.0.0.1:1001", 12.0, 12.1))
    assert len(found) == 1


def test_an_owner_that_took_the_container_back_at_a_newer_epoch_is_not_stale(
    tmp_path: Path,
) -> None:
    back = [*HANDOVER, *[(20.0 + t / 4, "n1", 5) for t in range(8)]]
    # n1 answered at 20.1, first seen at epoch 5 at 20.25: within the sampling slack.
    assert not _stale(_sampler(tmp_path, back), ("http://127.0.0.1:1001/x", None, 20.0, 20.1))


# n2 serves at epoch 2; n1, seen not holding the container until t=10, takes it over (it shows
# no epoch while it recovers), serves an append at t=12 at an epoch no sample shows, and hands
# it back to n2 at epoch 4.
BRIEF = (
    [(t / 4, "n2", 2) for t in range(32)]
    + [(10.5 + t / 4, "n1", None) for t in range(6)]
    + [(12.5 + t / 4, "n2", 4) for t in range(8)]
)


def _absent_until(sampler: OwnershipSampler, node: str, until: float) -> None:
    container = container_of(SEGMENT, CONTAINERS)
    for t in range(int(until * 4) + 1):
        sampler.absent(container, node, t / 4 - 0.01, t / 4)


def test_a_node_that_served_between_two_samples_is_not_stale(tmp_path: Path) -> None:
    sampler = _sampler(tmp_path, BRIEF)
    _absent_until(sampler, "n1", 10.0)
    # n1 opened the log after t=10, when n2 had been seen at epoch 2: its epoch is at least 3.
    assert not _stale(sampler, ("http://127.0.0.1:1001/x", None, 12.0, 12.05))


def test_an_owner_never_seen_without_the_container_gets_no_such_benefit(tmp_path: Path) -> None:
    # n2 held it from the start at epoch 2 and n1 was seen at epoch 3 from t=10: an append n2
    # answered after that is stale although no sample showed n2 without it, nor n1's takeover.
    sampler = _sampler(tmp_path, [*BRIEF[:32], *[(10.0 + t / 4, "n1", 3) for t in range(8)]])
    _absent_until(sampler, "n1", 9.0)
    found = _stale(sampler, ("http://127.0.0.1:1002/x", None, 11.0, 11.05))
    assert len(found) == 1 and "epoch at most 2" in found[0] and "epoch 3" in found[0]


def test_an_epoch_seen_after_the_takers_last_absence_still_makes_it_stale(
    tmp_path: Path,
) -> None:
    # n1 was last seen without the container at t=10; n2 was seen at epoch 5 at t=11 (n1 may
    # have opened below it): an append n1 answered after t=11, at no epoch seen, is stale.
    sampler = _sampler(tmp_path, [*BRIEF[:32], (11.0, "n2", 5)])
    _absent_until(sampler, "n1", 10.0)
    found = _stale(sampler, ("http://127.0.0.1:1001/x", None, 11.5, 11.55))
    assert len(found) == 1 and "epoch at most 3" in found[0] and "epoch 5" in found[0]


def test_an_append_answered_by_no_known_node_is_reported(tmp_path: Path) -> None:
    found = _stale(_sampler(tmp_path, HANDOVER), ("http://127.0.0.1:9/x", None, 1.0, 1.1))
    assert len(found) == 1 and "unknown node" in found[0]
