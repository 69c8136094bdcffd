"""An ordered map from int keys (segment offsets) to values, kept as an AVL tree.

Each segment's read index is one of these, keyed by the start offset of each entry
(docs/architecture.md, the path of a read). The read index needs, cheaply and with a
bounded worst case:

- ``floor(offset)``: the entry containing an offset (the greatest start offset <= it);
- inserting at the maximum key, since appends arrive in offset order, while Tier 2 cache fills
  may land anywhere below the tail;
- ``last()``, for the tail of the segment;
- ``items(from_key)``: the entry containing an offset, then the ones that follow it;
- ``remove_below(offset)``: dropping a prefix when the segment is truncated.

The standard library has no sorted map, and sorted lists with ``bisect`` cost O(n) per insert
or delete away from the end. Written here, not taken from a library, its costs are known:
every operation is O(log n) (plus the number of entries returned).

Not thread-safe; the segment store's core runs on one event loop.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Generic

from segmentstore.reading.avl_nodes import (
    Node,
    V,
    height_of,
    join,
    rebalance,
    verify,
)

__all__ = ["AvlTree"]


class AvlTree(Generic[V]):
    """An ordered map of int keys to values with O(log n) insert, remove and floor/ceiling.

    ``get`` and ``remove`` return ``None`` for an absent key, so if ``V`` admits ``None`` they
    cannot tell it from a stored ``None``; ``floor``/``ceiling``/``first``/``last`` return a
    ``(key, value)`` pair and can.

    The nodes holding the smallest and the largest key are cached: ``last()`` is O(1) and a
    ``floor`` at or beyond the tail returns without descending. The right spine (root to
    largest key) is cached too while only appends happen, so an insert above the tail does not
    descend the tree either.
    """

    __slots__ = ("_max", "_min", "_root", "_size", "_spine", "_version")

    def __init__(self) -> None:
        self._root: Node[V] | None = None
        self._min: Node[V] | None = None
        self._max: Node[V] | None = None
        self._size = 0
        # The path from the root down the right links to the largest key, which is exactly the
        # path an append rebalances. Kept up to date by appends; any other change of shape
        # drops it (None) and the next append walks the spine again.
        self._spine: list[Node[V]] | None = None
        # Bumped on every change of shape, so an iterator can refuse to continue over a tree
        # that was rebalanced (or had keys moved between nodes) under it.
        self._version = 0

    def __len__(self) -> int:
        return self._size

    def __repr__(self) -> str:
        return f"AvlTree(size={self._size}, height={self.height})"

    @property
    def height(self) -> int:
        """Height of the tree: 0 when empty, 1 for a single entry."""
        return height_of(self._root)

    # Lookups

    def get(self, key: int) -> V | None:
        """The value at ``key``, or ``None`` if there is none."""
        node = self._root
        while node is not None:
            k = node.key
            if key < k:
                node = node.left
            elif key > k:
                node = node.right
            else:
                return node.value
        return None

    def floor(self, key: int) -> tuple[int, V] | None:
        """The entry with the greatest key <= ``key``, or ``None`` if every key is greater."""
        tail = self._max
        if tail is None:
            return None
        if key >= tail.key:
            # Reads at or near the tail are the common case; skip the descent.
            return tail.key, tail.value
        # One comparison per level: an exact match is just another candidate, and every key
        # below it on the way down is greater than ``key``, so it stays the best.
        best: Node[V] | None = None
        node = self._root
        while node is not None:
            if key < node.key:
                node = node.left
            else:
                best = node
                node = node.right
        return None if best is None else (best.key, best.value)

    def ceiling(self, key: int) -> tuple[int, V] | None:
        """The entry with the least key >= ``key``, or ``None`` if every key is smaller."""
        head = self._min
        if head is None:
            return None
        if key <= head.key:
            return head.key, head.value
        best: Node[V] | None = None
        node = self._root
        while node is not None:
            if key > node.key:
                node = node.right
            else:
                best = node
                node = node.left
        return None if best is None else (best.key, best.value)

    def first(self) -> tuple[int, V] | None:
        """The entry with the smallest key, or ``None`` when empty."""
        node = self._min
        return None if node is None else (node.key, node.value)

    def last(self) -> tuple[int, V] | None:
        """The entry with the largest key, or ``None`` when empty."""
        node = self._max
        return None if node is None else (node.key, node.value)

    def items(self, from_key: int | None = None) -> Iterator[tuple[int, V]]:
        """``(key, value)`` pairs in ascending key order.

        With ``from_key``, iteration starts at the *floor* of ``from_key``: the entry with the
        greatest key <= ``from_key`` (for the read index, the entry that contains offset
        ``from_key``), then every later entry. If no key is <= ``from_key``, it starts at the
        first entry. Without ``from_key``, every entry is returned.

        Changing the tree's keys (insert of a new key, remove, ``remove_below``, ``clear``)
        while iterating makes the next step raise ``RuntimeError``; replacing the value of an
        existing key does not.
        """
        start: int | None = None
        if from_key is not None:
            found = self.floor(from_key)
            if found is not None:
                start = found[0]
        return self._iterate(start)

    def _iterate(self, start: int | None) -> Iterator[tuple[int, V]]:
        version = self._version
        # The stack holds the nodes still to be visited whose left subtrees are done (or
        # skipped because they lie below ``start``): at most the tree's height.
        stack: list[Node[V]] = []
        node = self._root
        while node is not None:
            if start is None or node.key >= start:
                stack.append(node)
                node = node.left
            else:
                node = node.right
        while stack:
            if self._version != version:
                raise RuntimeError("AvlTree changed during iteration")
            node = stack.pop()
            yield node.key, node.value
            child = node.right
            while child is not None:
                stack.append(child)
                child = child.left

    # Changes

    def insert(self, key: int, value: V) -> None:
        """Map ``key`` to ``value``, replacing the value if ``key`` is already present."""
        tail = self._max
        if tail is not None and key > tail.key:
            # Appending, the common case, is written out here rather than in a helper: the
            # call alone would be a tenth of its cost.
            node = Node(key, value)
            spine = self._spine
            if spine is None:
                spine = []
                walk = self._root
                while walk is not None:
                    spine.append(walk)
                    walk = walk.right
                self._spine = spine
            tail.right = node
            spine.append(node)
            self._max = node
            self._size += 1
            self._version += 1
            # Only right subtrees grow, so a node can only become right-heavy, and its right
            # child (the next spine node) right-heavy too: one single left rotation at most,
            # after which the subtree is back to its old height and nothing above changes.
            i = len(spine) - 2
            while i >= 0:
                parent = spine[i]
                left = parent.left
                lh = 0 if left is None else left.height
                rh = spine[i + 1].height
                if rh <= lh + 1:
                    height = (lh if lh > rh else rh) + 1
                    if height == parent.height:
                        return
                    parent.height = height
                    i -= 1
                    continue
                # Almost every append ends here, so the rotation is written out: ``pivot``
                # rises, ``parent`` becomes its left child (leaving the spine) and takes
                # ``pivot``'s inner subtree.
                pivot = spine[i + 1]
                inner = pivot.left
                parent.right = inner
                pivot.left = parent
                ih = 0 if inner is None else inner.height
                parent.height = (lh if lh > ih else ih) + 1
                # A right-heavy pivot has a right child: the next node on the spine.
                oh = spine[i + 2].height
                pivot.height = (oh if oh > parent.height else parent.height) + 1
                if i == 0:
                    self._root = pivot
                else:
                    spine[i - 1].right = pivot
                del spine[i]
                return
            # Every height on the spine grew, the root's included.
            return

        root = self._root
        if root is None:
            node = Node(key, value)
            self._root = self._min = self._max = node
            self._spine = None
            self._size = 1
            self._version += 1
            return
        # The path from the root to the new node's parent, for rebalancing on the way up.
        path: list[Node[V]] = []
        append = path.append
        parent = root
        while True:
            k = parent.key
            append(parent)
            if key < k:
                child = parent.left
                if child is None:
                    node = Node(key, value)
                    parent.left = node
                    break
            elif key > k:
                child = parent.right
                if child is None:
                    node = Node(key, value)
                    parent.right = node
                    break
            else:
                parent.value = value
                return
            parent = child
        head = self._min
        assert head is not None
        if key < head.key:
            self._min = node
        self._size += 1
        self._version += 1
        # Rotations below the tail may move nodes on or off the right spine.
        self._spine = None
        self._retrace(path)

    def remove(self, key: int) -> V | None:
        """Remove ``key``; returns its value, or ``None`` if it was not present."""
        path: list[Node[V]] = []
        node = self._root
        while node is not None:
            k = node.key
            if key < k:
                path.append(node)
                node = node.left
            elif key > k:
                path.append(node)
                node = node.right
            else:
                break
        if node is None:
            return None
        value = node.value
        if node.left is not None and node.right is not None:
            # Two children: move the successor's entry into this node and unlink the
            # successor instead, which has no left child. The successor's node leaves the
            # tree, so the min/max caches are checked against ``unlinked`` below.
            path.append(node)
            unlinked = node.right
            while unlinked.left is not None:
                path.append(unlinked)
                unlinked = unlinked.left
            node.key = unlinked.key
            node.value = unlinked.value
            replacement = unlinked.right
        else:
            unlinked = node
            replacement = node.left if node.left is not None else node.right
        if path:
            parent = path[-1]
            if parent.left is unlinked:
                parent.left = replacement
            else:
                parent.right = replacement
        else:
            self._root = replacement
        self._size -= 1
        self._version += 1
        self._spine = None
        if unlinked is self._min:
            self._min = self._leftmost()
        if unlinked is self._max:
            self._max = self._rightmost()
        self._retrace(path)
        return value

    def remove_below(self, key: int) -> list[V]:
        """Remove every entry whose key is < ``key``; returns their values in ascending key
        order. O(log n + k) for k removed entries."""
        head = self._min
        if head is None or head.key >= key:
            return []
        removed: list[V] = []
        # Walk down towards ``key``. A node below it goes, with its whole left subtree; a node
        # at or above it stays, with its right subtree, and its left subtree is cut further.
        kept: list[Node[V]] = []
        node = self._root
        while node is not None:
            if node.key < key:
                self._collect(node.left, removed)
                removed.append(node.value)
                node = node.right
            else:
                kept.append(node)
                node = node.left
        # Reassemble bottom-up: each kept node joins what survived of its left subtree with its
        # untouched right subtree.
        rebuilt: Node[V] | None = None
        for keep in reversed(kept):
            rebuilt = join(rebuilt, keep, keep.right)
        self._root = rebuilt
        self._size -= len(removed)
        self._version += 1
        self._spine = None
        self._min = self._leftmost()
        if rebuilt is None:
            self._max = None
        return removed

    def clear(self) -> None:
        """Remove every entry."""
        self._root = self._min = self._max = None
        self._spine = None
        self._size = 0
        self._version += 1

    # Internals

    def _retrace(self, path: list[Node[V]]) -> None:
        """Fix heights and balance from ``path[-1]`` up to the root after one insert or unlink
        below it. Stops as soon as a subtree's height is unchanged: nothing above can change."""
        i = len(path) - 1
        while i >= 0:
            node = path[i]
            old_height = node.height
            left = node.left
            right = node.right
            lh = 0 if left is None else left.height
            rh = 0 if right is None else right.height
            if -1 <= lh - rh <= 1:
                node.height = (lh if lh > rh else rh) + 1
                if node.height == old_height:
                    return
                i -= 1
                continue
            top = rebalance(node)
            if i == 0:
                self._root = top
            else:
                parent = path[i - 1]
                if parent.left is node:
                    parent.left = top
                else:
                    parent.right = top
            if top.height == old_height:
                return
            i -= 1

    def _leftmost(self) -> Node[V] | None:
        node = self._root
        if node is None:
            return None
        while node.left is not None:
            node = node.left
        return node

    def _rightmost(self) -> Node[V] | None:
        node = self._root
        if node is None:
            return None
        while node.right is not None:
            node = node.right
        return node

    @staticmethod
    def _collect(node: Node[V] | None, out: list[V]) -> None:
        """Append the values of the subtree at ``node`` to ``out``, in key order."""
        stack: list[Node[V]] = []
        while stack or node is not None:
            while node is not None:
                stack.append(node)
                node = node.left
            node = stack.pop()
            out.append(node.value)
            node = node.right

    def check_invariants(self) -> None:
        """Raise ``AssertionError`` unless the tree is a well-formed AVL tree whose size and
        cached first/last entries and right spine are right. O(n); for tests."""
        count, first, last = verify(self._root)
        if count != self._size:
            raise AssertionError(f"size is {self._size} but the tree holds {count} nodes")
        if self._min is not first:
            raise AssertionError("cached first entry is not the leftmost node")
        if self._max is not last:
            raise AssertionError("cached last entry is not the rightmost node")
        if self._spine is not None:
            spine: list[Node[V]] = []
            cursor = self._root
            while cursor is not None:
                spine.append(cursor)
                cursor = cursor.right
            if spine != self._spine:
                raise AssertionError(
                    "cached right spine is not the path from the root to the last entry"
                )
