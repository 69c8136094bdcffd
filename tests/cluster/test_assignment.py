"""The balanced assignment of containers to live nodes, moving as few as it can."""

from __future__ import annotations

import random

import pytest

from segmentstore.cluster.assignment import assign


def shares(owners: dict[int, str], nodes: list[str]) -> list[int]:
    return [sum(1 for o in owners.values() if o == node) for node in nodes]


def moved(before: dict[int, str], after: dict[int, str]) -> set[int]:
    return {c for c in after if before.get(c) != after[c]}


@pytest.mark.parametrize("containers", [1, 4, 8, 16, 64])
@pytest.mark.parametrize("nodes", [1, 2, 3, 4, 7])
def test_every_container_has_one_owner_and_shares_differ_by_at_most_one(
    containers: int, nodes: int
) -> None:
    ids = [f"n{i}" for i in range(nodes)]
    owners = assign(containers, ids)
    assert sorted(owners) == list(range(containers))
    assert max(shares(owners, ids)) - min(shares(owners, ids)) <= 1
    assert sum(shares(owners, ids)) == containers


def test_the_answer_depends_on_the_view_only() -> None:
    assert assign(16, ["b", "a", "c"]) == assign(16, ["c", "b", "a", "a"])
    held = {0: "a", 5: "b", 9: "c"}
    assert assign(16, ["b", "a", "c"], held) == assign(16, ["c", "a", "b"], dict(held))
    assert assign(16, []) == {}


def test_a_settled_cluster_keeps_its_assignment() -> None:
    nodes = ["n1", "n2", "n3"]
    settled = assign(8, nodes)
    assert assign(8, nodes, settled) == settled


@pytest.mark.parametrize("containers", [4, 8, 16, 64])
def test_a_dead_node_moves_only_its_own_containers(containers: int) -> None:
    nodes = ["n1", "n2", "n3"]
    before = assign(containers, nodes)
    after = assign(containers, ["n2", "n3"], before)
    assert moved(before, after) == {c for c, n in before.items() if n == "n1"}
    assert max(shares(after, ["n2", "n3"])) - min(shares(after, ["n2", "n3"])) <= 1


@pytest.mark.parametrize("containers", [4, 8, 16, 64])
def test_a_returning_node_takes_back_only_its_share(containers: int) -> None:
    nodes = ["n1", "n2", "n3"]
    while_away = assign(containers, ["n2", "n3"], assign(containers, nodes))
    back = assign(containers, nodes, while_away)
    assert {back[c] for c in moved(while_away, back)} <= {"n1"}
    assert len(moved(while_away, back)) == shares(back, nodes)[0]
    assert shares(back, nodes)[0] in (containers // 3, containers // 3 + 1)


def test_a_joining_node_takes_exactly_its_share() -> None:
    before = assign(64, ["n1", "n2", "n3"])
    after = assign(64, ["n1", "n2", "n3", "n4"], before)
    assert {after[c] for c in moved(before, after)} == {"n4"}
    assert len(moved(before, after)) == 16


def test_containers_in_hand_over_settle_where_the_view_says() -> None:
    """Mid-move views (some containers released, some still held) never ask a node that
    holds its share to give up more, and converge on the settled answer."""
    rng = random.Random(7)
    nodes = ["n1", "n2", "n3", "n4"]
    for _ in range(200):
        held = {c: rng.choice(nodes) for c in range(16) if rng.random() < 0.7}
        wanted = assign(16, nodes, held)
        for node in nodes:
            kept = [c for c, n in held.items() if n == node and wanted[c] == node]
            assert len(kept) == min(
                sum(1 for n in held.values() if n == node), shares(wanted, [node])[0]
            )
        assert assign(16, nodes, wanted) == wanted
