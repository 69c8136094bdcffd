"""The nodes the kernel knows (by node id) and where each one is in the backing directory.

A node is a file, directory or symbolic link of the backing directory, known by the inode
number it has there (stable across renames and links). Its *links* are the entries that name it
now. Nothing this file system removes is really removed until no power loss can bring it back:
an unlinked or replaced file keeps a hard link in the graveyard (``.lazyfs-graveyard/<ino>``,
hidden from the mount), a removed directory is moved there, and both leave it only when the
removal is durable and no one has the node open.
"""

from __future__ import annotations

import os
import shutil
import stat
from dataclasses import dataclass, field

from segmentstore.drill.lazyfs.abi import ROOT_ID

GRAVEYARD = ".lazyfs-graveyard"


@dataclass(eq=False)
class Node:
    nid: int
    ino: int
    is_dir: bool
    links: dict[tuple[int, str], None] = field(default_factory=dict)  # ordered set of entries
    in_graveyard: bool = False
    opened: int = 0
    dead: bool = False


class Nodes:
    def __init__(self, root: str) -> None:
        self.root = root
        self.graveyard = os.path.join(root, GRAVEYARD)
        os.makedirs(self.graveyard, exist_ok=True)
        st = os.lstat(root)
        self._root = Node(ROOT_ID, st.st_ino, True)
        self._by_id: dict[int, Node] = {ROOT_ID: self._root}
        self._by_ino: dict[int, Node] = {st.st_ino: self._root}
        self._next_id = ROOT_ID + 1

    def get(self, nid: int) -> Node:
        node = self._by_id.get(nid)
        if node is None or node.dead:
            raise FileNotFoundError(2, "stale node", str(nid))
        return node

    def path(self, node: Node) -> str:
        if node.nid == ROOT_ID:
            return self.root
        for parent, name in node.links:
            return os.path.join(self.path(self.get(parent)), name)
        if node.in_graveyard:
            return self.grave(node)
        raise FileNotFoundError(2, "node has no name", str(node.nid))

    def child(self, parent: Node, name: str) -> str:
        if parent.nid == ROOT_ID and name == GRAVEYARD:
            raise PermissionError(1, "reserved name", name)
        return os.path.join(self.path(parent), name)

    def grave(self, node: Node) -> str:
        return os.path.join(self.graveyard, str(node.ino))

    def found(self, parent: Node, name: str, st: os.stat_result) -> Node:
        """The node that ``parent/name`` names (``st`` is its lstat), now known by that name."""
        node = self._by_ino.get(st.st_ino)
        if node is None:
            node = Node(self._next_id, st.st_ino, stat.S_ISDIR(st.st_mode))
            self._next_id += 1
            self._by_id[node.nid] = node
            self._by_ino[node.ino] = node
        if node.is_dir:
            node.links.clear()  # a directory has one name
        node.links[(parent.nid, name)] = None
        return node

    def lookup(self, parent: Node, name: str) -> Node:
        path = self.child(parent, name)
        return self.found(parent, name, os.lstat(path))

    def lookup_optional(self, parent: Node, name: str) -> Node | None:
        try:
            return self.lookup(parent, name)
        except FileNotFoundError:
            return None

    def bury(self, node: Node, entry: tuple[int, str]) -> None:
        """Take ``entry``'s name away from ``node`` (it must name it), keeping the node in the
        graveyard."""
        path = os.path.join(self.path(self.get(entry[0])), entry[1])
        if node.is_dir:
            os.rename(path, self.grave(node))
            node.links.clear()
            node.in_graveyard = True
            return
        if not node.in_graveyard:
            os.link(path, self.grave(node), follow_symlinks=False)
            node.in_graveyard = True
        os.unlink(path)
        node.links.pop(entry, None)

    def raise_from_grave(self, node: Node, entry: tuple[int, str]) -> None:
        """Give ``node`` the name ``entry`` (a directory must be in the graveyard)."""
        path = os.path.join(self.path(self.get(entry[0])), entry[1])
        if node.is_dir:
            os.rename(self.grave(node), path)
            node.in_graveyard = False
            node.links.clear()
        else:
            source = self.grave(node) if node.in_graveyard else self.path(node)
            os.link(source, path, follow_symlinks=False)
        node.links[entry] = None

    def release_grave(self, node: Node) -> None:
        """The graveyard no longer keeps ``node``; if nothing names it, it is gone for good."""
        if node.in_graveyard:
            grave = self.grave(node)
            if node.is_dir:
                shutil.rmtree(grave, ignore_errors=True)
            else:
                os.unlink(grave)
            node.in_graveyard = False
        if not node.links and node.nid != ROOT_ID:
            node.dead = True
            del self._by_id[node.nid]
            if self._by_ino.get(node.ino) is node:
                del self._by_ino[node.ino]

    def empty_graveyard(self) -> None:
        for name in os.listdir(self.graveyard):
            path = os.path.join(self.graveyard, name)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.unlink(path)

    def nlink(self, node: Node, st: os.stat_result) -> int:
        return st.st_nlink - (1 if node.in_graveyard and not node.is_dir else 0)
