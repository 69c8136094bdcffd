"""The nodes of :class:`segmentstore.reading.avl_tree.AvlTree` and the rebalancing that keeps them
AVL.

Rotations, rebalancing and joins work on subtrees and know nothing of the tree's caches; the
tree composes them. ``verify`` walks a whole tree for tests.
"""

from __future__ import annotations

from typing import Generic, TypeVar

V = TypeVar("V")


class Node(Generic[V]):
    # Slots keep a node at five pointers plus the object header: a read index holds one node
    # per cached append, and there may be millions across all segments.
    __slots__ = ("height", "key", "left", "right", "value")

    def __init__(self, key: int, value: V) -> None:
        self.key = key
        self.value = value
        self.left: Node[V] | None = None
        self.right: Node[V] | None = None
        # Height of the subtree rooted here; a leaf is 1 and the empty tree 0.
        self.height = 1


def height_of(node: Node[V] | None) -> int:
    return 0 if node is None else node.height


def rotate_right(node: Node[V]) -> Node[V]:
    """Lift ``node.left`` above ``node``; returns the new subtree root, heights updated."""
    pivot = node.left
    assert pivot is not None
    node.left = pivot.right
    pivot.right = node
    lh = height_of(node.left)
    rh = height_of(node.right)
    node.height = (lh if lh > rh else rh) + 1
    ph = height_of(pivot.left)
    pivot.height = (ph if ph > node.height else node.height) + 1
    return pivot


def rotate_left(node: Node[V]) -> Node[V]:
    """Lift ``node.right`` above ``node``; returns the new subtree root, heights updated."""
    pivot = node.right
    assert pivot is not None
    node.right = pivot.left
    pivot.left = node
    lh = height_of(node.left)
    rh = height_of(node.right)
    node.height = (lh if lh > rh else rh) + 1
    ph = height_of(pivot.right)
    pivot.height = (ph if ph > node.height else node.height) + 1
    return pivot


def rebalance(node: Node[V]) -> Node[V]:
    """Restore the AVL property at ``node``, whose children are balanced and differ in height by
    at most 2; returns the subtree's new root with its height set."""
    lh = height_of(node.left)
    rh = height_of(node.right)
    if lh > rh + 1:
        left = node.left
        assert left is not None
        if height_of(left.left) < height_of(left.right):
            node.left = rotate_left(left)
        return rotate_right(node)
    if rh > lh + 1:
        right = node.right
        assert right is not None
        if height_of(right.right) < height_of(right.left):
            node.right = rotate_right(right)
        return rotate_left(node)
    node.height = (lh if lh > rh else rh) + 1
    return node


def join(left: Node[V] | None, middle: Node[V], right: Node[V] | None) -> Node[V]:
    """A balanced tree of ``left``, ``middle``, ``right`` (every key of ``left`` below
    ``middle.key``, every key of ``right`` above it), where ``left`` is at most one taller than
    ``right``. O(h(right) - h(left) + 1); the result is at most max(h(left), h(right)) + 1 high.

    Used by ``remove_below``: rebuilding the kept part with joins along one root-to-leaf path
    costs O(log n) in total, where removing the prefix one key at a time would cost O(k log n).
    There ``left`` is what survived of ``middle``'s original left subtree, never taller than it
    (by induction, from the height bound above), and so never more than one taller than
    ``right``; only the case of a taller ``right`` needs handling.
    """
    lh = height_of(left)
    rh = height_of(right)
    if rh > lh + 1:
        assert right is not None
        # Descend the left spine of the taller tree to a subtree about as high as ``left``,
        # hang the join there, and rebalance on the way back up.
        right.left = join(left, middle, right.left)
        return rebalance(right)
    assert lh <= rh + 1, "left side of a join too tall"
    middle.left = left
    middle.right = right
    middle.height = (lh if lh > rh else rh) + 1
    return middle


def verify(root: Node[V] | None) -> tuple[int, Node[V] | None, Node[V] | None]:
    """Check a subtree: keys strictly ascending in order, stored heights right, siblings within
    one in height. Returns (node count, leftmost, rightmost); raises ``AssertionError``. O(n)."""

    def fail(message: str) -> None:
        # Explicit raises rather than ``assert``, so ``python -O`` cannot switch checks off.
        raise AssertionError(message)

    count = 0
    # Post-order walk, so each node's children are verified before its own height.
    stack: list[tuple[Node[V], bool]] = []
    if root is not None:
        stack.append((root, False))
    while stack:
        node, children_done = stack.pop()
        if not children_done:
            stack.append((node, True))
            if node.right is not None:
                stack.append((node.right, False))
            if node.left is not None:
                stack.append((node.left, False))
            continue
        lh = height_of(node.left)
        rh = height_of(node.right)
        if node.height != max(lh, rh) + 1:
            fail(f"node {node.key}: stored height {node.height}, actual {max(lh, rh) + 1}")
        if abs(lh - rh) > 1:
            fail(f"node {node.key}: unbalanced, left height {lh}, right height {rh}")
        count += 1
    # In-order walk for the ordering, separately, so the check is plainly right.
    walk: list[Node[V]] = []
    cursor = root
    first: Node[V] | None = None
    previous: Node[V] | None = None
    while walk or cursor is not None:
        while cursor is not None:
            walk.append(cursor)
            cursor = cursor.left
        cursor = walk.pop()
        if first is None:
            first = cursor
        if previous is not None and previous.key >= cursor.key:
            fail(f"keys out of order: {previous.key} before {cursor.key}")
        previous = cursor
        cursor = cursor.right
    return count, first, previous
