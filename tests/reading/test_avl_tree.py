"""AvlTree against a model ordered map (a dict plus its sorted keys), with the tree's own
invariant check after every change, plus height bounds on large ascending, descending and
random workloads."""

from __future__ import annotations

import bisect
import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from segmentstore.reading.avl_tree import AvlTree

# A narrow key range makes replacements, removals of present keys and exact floor hits common;
# a few far-off keys reach the empty ends of the range.
KEYS = st.one_of(st.integers(0, 60), st.integers(-(2**40), 2**40))


def avl_height_bound(n: int) -> float:
    # An AVL tree of n nodes is at most about 1.4405 * log2(n + 2) - 0.3277 high.
    return 1.45 * math.log2(n + 2)


class Model:
    """The reference: a plain dict and its keys kept sorted."""

    def __init__(self) -> None:
        self.values: dict[int, str] = {}
        self.keys: list[int] = []

    def insert(self, key: int, value: str) -> None:
        if key not in self.values:
            bisect.insort(self.keys, key)
        self.values[key] = value

    def remove(self, key: int) -> str | None:
        if key not in self.values:
            return None
        self.keys.remove(key)
        return self.values.pop(key)

    def remove_below(self, key: int) -> list[str]:
        cut = bisect.bisect_left(self.keys, key)
        gone, self.keys = self.keys[:cut], self.keys[cut:]
        return [self.values.pop(k) for k in gone]

    def floor(self, key: int) -> tuple[int, str] | None:
        i = bisect.bisect_right(self.keys, key)
        return None if i == 0 else (self.keys[i - 1], self.values[self.keys[i - 1]])

    def ceiling(self, key: int) -> tuple[int, str] | None:
        i = bisect.bisect_left(self.keys, key)
        return None if i == len(self.keys) else (self.keys[i], self.values[self.keys[i]])

    def items(self, from_key: int | None) -> list[tuple[int, str]]:
        start = 0
        if from_key is not None:
            start = max(bisect.bisect_right(self.keys, from_key) - 1, 0)
        return [(k, self.values[k]) for k in self.keys[start:]]


class AvlTreeMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tree: AvlTree[str] = AvlTree()
        self.model = Model()
        self.counter = 0

    def _value(self) -> str:
        # Distinct values, so a replacement that kept the old value would be caught.
        self.counter += 1
        return f"v{self.counter}"

    @rule(key=KEYS)
    def insert(self, key: int) -> None:
        value = self._value()
        self.tree.insert(key, value)
        self.model.insert(key, value)

    @rule(start=st.integers(0, 60), count=st.integers(1, 40))
    def append_run(self, start: int, count: int) -> None:
        # The read index's main pattern: keys above everything present, in order.
        base = (self.model.keys[-1] + 1 if self.model.keys else 0) + start
        for key in range(base, base + count):
            value = self._value()
            self.tree.insert(key, value)
            self.model.insert(key, value)

    @rule(key=KEYS)
    def remove(self, key: int) -> None:
        assert self.tree.remove(key) == self.model.remove(key)

    @precondition(lambda self: bool(self.model.keys))
    @rule(data=st.data())
    def remove_present(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(self.model.keys))
        assert self.tree.remove(key) == self.model.remove(key)

    @rule(key=KEYS)
    def remove_below(self, key: int) -> None:
        assert self.tree.remove_below(key) == self.model.remove_below(key)

    @precondition(lambda self: bool(self.model.keys))
    @rule(data=st.data(), offset=st.integers(-1, 1))
    def remove_below_near_present(self, data: st.DataObject, offset: int) -> None:
        key = data.draw(st.sampled_from(self.model.keys)) + offset
        assert self.tree.remove_below(key) == self.model.remove_below(key)

    @rule(key=KEYS)
    def lookups(self, key: int) -> None:
        assert self.tree.get(key) == self.model.values.get(key)
        assert self.tree.floor(key) == self.model.floor(key)
        assert self.tree.ceiling(key) == self.model.ceiling(key)

    @rule(from_key=st.none() | KEYS)
    def items(self, from_key: int | None) -> None:
        assert list(self.tree.items(from_key)) == self.model.items(from_key)

    @rule()
    def clear(self) -> None:
        self.tree.clear()
        self.model = Model()

    @invariant()
    def matches_model(self) -> None:
        self.tree.check_invariants()
        assert len(self.tree) == len(self.model.keys)
        keys = self.model.keys
        assert self.tree.first() == (None if not keys else (keys[0], self.model.values[keys[0]]))
        assert self.tree.last() == (None if not keys else (keys[-1], self.model.values[keys[-1]]))
        assert self.tree.height <= avl_height_bound(len(keys))


AvlTreeMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
TestAvlTreeMachine = AvlTreeMachine.TestCase


@settings(max_examples=60, deadline=None)
@given(
    keys=st.sets(st.integers(0, 10_000), max_size=400),
    bound=st.integers(-1, 10_001),
    seed=st.integers(0, 2**32 - 1),
)
def test_remove_below_on_larger_trees(keys: set[int], bound: int, seed: int) -> None:
    # The state machine's trees stay small; here the split reassembles trees with a real
    # height difference between the pieces it joins.
    order = sorted(keys)
    random.Random(seed).shuffle(order)
    tree: AvlTree[int] = AvlTree()
    for key in order:
        tree.insert(key, -key)
    removed = tree.remove_below(bound)
    tree.check_invariants()
    assert removed == [-k for k in sorted(keys) if k < bound]
    assert [k for k, _ in tree.items()] == sorted(k for k in keys if k >= bound)


@pytest.mark.parametrize("keys", [range(10_000), range(10_000, 0, -1)], ids=["up", "down"])
def test_monotonic_inserts_stay_balanced(keys: range) -> None:
    tree: AvlTree[int] = AvlTree()
    for i, key in enumerate(keys, start=1):
        tree.insert(key, key * 2)
        if i & (i - 1) == 0:  # powers of two: check along the way, not only at the end
            tree.check_invariants()
    tree.check_invariants()
    n = len(keys)
    assert len(tree) == n
    assert tree.height <= avl_height_bound(n)
    assert list(tree.items()) == [(k, k * 2) for k in sorted(keys)]


def test_random_removes_keep_balance() -> None:
    rng = random.Random(20240601)
    keys = list(range(0, 20_000, 2))
    rng.shuffle(keys)
    tree: AvlTree[int] = AvlTree()
    for key in keys:
        tree.insert(key, key)
    tree.check_invariants()
    present = set(keys)
    rng.shuffle(keys)
    for i, key in enumerate(keys[:7_500], start=1):
        assert tree.remove(key) == key
        assert tree.remove(key) is None
        present.discard(key)
        if i % 500 == 0:
            tree.check_invariants()
            assert tree.height <= avl_height_bound(len(tree))
    assert [k for k, _ in tree.items()] == sorted(present)


def test_appends_interleaved_with_other_changes() -> None:
    # The right-spine cache used by appends must survive (or be rebuilt after) every other kind
    # of change; check_invariants compares it with the real spine.
    rng = random.Random(7)
    tree: AvlTree[int] = AvlTree()
    model: dict[int, int] = {}
    next_key = 0
    for step in range(3_000):
        next_key += rng.randint(1, 3)
        tree.insert(next_key, step)
        model[next_key] = step
        roll = rng.random()
        if roll < 0.1:
            key = rng.randint(0, next_key)
            tree.insert(key, -step)
            model[key] = -step
        elif roll < 0.2:
            key = rng.choice(list(model))
            assert tree.remove(key) == model.pop(key)
        elif roll < 0.22:
            bound = rng.randint(0, next_key)
            assert tree.remove_below(bound) == [model.pop(k) for k in sorted(model) if k < bound]
        if step % 100 == 0:
            tree.check_invariants()
    tree.check_invariants()
    assert list(tree.items()) == sorted(model.items())


def test_empty_tree() -> None:
    tree: AvlTree[str] = AvlTree()
    assert len(tree) == 0
    assert tree.height == 0
    assert tree.get(1) is None
    assert tree.floor(1) is None
    assert tree.ceiling(1) is None
    assert tree.first() is None
    assert tree.last() is None
    assert tree.remove(1) is None
    assert tree.remove_below(10) == []
    assert list(tree.items()) == []
    assert list(tree.items(5)) == []
    tree.check_invariants()


def test_insert_replaces_value_of_existing_key() -> None:
    tree: AvlTree[str] = AvlTree()
    tree.insert(10, "a")
    tree.insert(10, "b")
    assert len(tree) == 1
    assert tree.get(10) == "b"


def test_floor_and_ceiling_between_and_at_keys() -> None:
    tree: AvlTree[str] = AvlTree()
    for key in (0, 100, 250):
        tree.insert(key, f"at{key}")
    assert tree.floor(-1) is None
    assert tree.floor(0) == (0, "at0")
    assert tree.floor(99) == (0, "at0")
    assert tree.floor(100) == (100, "at100")
    assert tree.floor(10**12) == (250, "at250")
    assert tree.ceiling(-5) == (0, "at0")
    assert tree.ceiling(1) == (100, "at100")
    assert tree.ceiling(250) == (250, "at250")
    assert tree.ceiling(251) is None


def test_items_start_at_the_entry_containing_from_key() -> None:
    tree: AvlTree[str] = AvlTree()
    for key in (0, 100, 250, 400):
        tree.insert(key, f"at{key}")
    assert [k for k, _ in tree.items(150)] == [100, 250, 400]  # floor, then the rest
    assert [k for k, _ in tree.items(250)] == [250, 400]  # exact hit
    assert [k for k, _ in tree.items(-1)] == [0, 100, 250, 400]  # nothing below: from the first
    assert [k for k, _ in tree.items(10**9)] == [400]
    assert [k for k, _ in tree.items()] == [0, 100, 250, 400]


def test_items_refuse_to_continue_after_a_change() -> None:
    tree: AvlTree[int] = AvlTree()
    for key in range(10):
        tree.insert(key, key)
    it = tree.items()
    assert next(it) == (0, 0)
    tree.insert(3, 33)  # replacing a value does not change the shape
    assert next(it) == (1, 1)
    tree.remove(5)
    with pytest.raises(RuntimeError):
        next(it)


def test_removing_a_node_whose_successor_is_the_last_entry() -> None:
    # Removing a node with two children moves its successor's entry into it and unlinks the
    # successor's node; when that successor is the last entry, the cached last node must move.
    tree: AvlTree[str] = AvlTree()
    for key in (2, 1, 3):
        tree.insert(key, f"at{key}")
    assert tree.remove(2) == "at2"
    tree.check_invariants()
    assert tree.last() == (3, "at3")
    tree.insert(4, "at4")
    tree.check_invariants()
    assert list(tree.items()) == [(1, "at1"), (3, "at3"), (4, "at4")]


def test_remove_below_everything_and_nothing() -> None:
    tree: AvlTree[int] = AvlTree()
    for key in range(100):
        tree.insert(key, key)
    assert tree.remove_below(0) == []
    assert len(tree) == 100
    assert tree.remove_below(50) == list(range(50))
    tree.check_invariants()
    assert tree.first() == (50, 50)
    assert tree.remove_below(1_000) == list(range(50, 100))
    tree.check_invariants()
    assert len(tree) == 0
    assert tree.last() is None
    tree.insert(7, 7)
    tree.check_invariants()
    assert tree.first() == tree.last() == (7, 7)


def test_check_invariants_catches_corruption() -> None:
    tree: AvlTree[int] = AvlTree()
    for key in range(7):
        tree.insert(key, key)
    tree.check_invariants()
    root = tree._root
    assert root is not None and root.left is not None
    root.left.key = 100  # out of order
    with pytest.raises(AssertionError, match="out of order"):
        tree.check_invariants()
    root.left.key = 1
    root.height += 1
    with pytest.raises(AssertionError, match="height"):
        tree.check_invariants()
