"""``LazyFS``: the file system's operations over the backing directory, with the un-synced
model kept beside them, and the power loss that applies it.

Every operation is passed through to the backing directory at once (so it always holds what
a process would see now) and recorded: data writes and truncations per file
(:mod:`.unsynced_data`), creations, removals and renames per entry (:mod:`.unsynced_names`).
``fsync``/``fdatasync`` of a file and ``fsync`` of a directory make their share durable, which
only means forgetting it. :meth:`LazyFS.lose_power` brings the backing directory back to what a
power loss at this moment leaves: the durable state plus the un-synced operations that a seeded
random choice keeps.
"""

from __future__ import annotations

import errno
import itertools
import os
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from segmentstore.drill.lazyfs.abi import ROOT_ID, dirent
from segmentstore.drill.lazyfs.nodes import GRAVEYARD, Node, Nodes
from segmentstore.drill.lazyfs.unsynced_data import Operation, UnsyncedFile
from segmentstore.drill.lazyfs.unsynced_names import Change, NameOperation, UnsyncedNames

Model = Literal["strict", "journaled"]
Keep = Literal["random", "none", "all"]
_STRATEGIES = ("none", "all", "prefix", "each")
_SHOWN = 20  # dropped operations named in a loss report


@dataclass(frozen=True)
class SyncPoint:
    nid: int
    unsynced: UnsyncedFile | None  # the file's un-synced operations when the sync began
    operations: int  # how many there were
    seq: int  # name operations numbered below this were done before it began


@dataclass
class Handle:
    node: Node
    fd: int = -1
    listing: list[bytes] | None = None  # a directory's entries, packed when it was opened


class LazyFS:
    def __init__(self, root: str, model: Model = "strict") -> None:
        self.nodes = Nodes(root)
        self.model = model
        self.names = UnsyncedNames()
        self.files: dict[int, UnsyncedFile] = {}
        self._handles: dict[int, Handle] = {}
        self._next_fh = itertools.count(1)
        self._seq = itertools.count()

    # -- names -------------------------------------------------------------------------------

    def lookup(self, parent: int, name: str) -> tuple[Node, os.stat_result]:
        node = self.nodes.lookup(self.nodes.get(parent), name)
        return node, os.lstat(self.nodes.path(node))

    def _created(self, parent: Node, name: str, what: str) -> tuple[Node, os.stat_result]:
        st = os.lstat(self.nodes.child(parent, name))
        node = self.nodes.found(parent, name, st)
        self._record(what, Change((parent.nid, name), None, node.nid))
        return node, st

    def _record(self, what: str, *changes: Change) -> None:
        self.names.record(NameOperation(next(self._seq), what, changes))

    def create(self, parent: int, name: str, mode: int) -> tuple[Node, os.stat_result, int]:
        directory = self.nodes.get(parent)
        path = self.nodes.child(directory, name)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode & 0o7777)
        node, st = self._created(directory, name, "create")
        return node, st, self._handle(Handle(node, fd))

    def mknod(self, parent: int, name: str, mode: int, rdev: int) -> tuple[Node, os.stat_result]:
        directory = self.nodes.get(parent)
        os.mknod(self.nodes.child(directory, name), mode, rdev)
        return self._created(directory, name, "create")

    def mkdir(self, parent: int, name: str, mode: int) -> tuple[Node, os.stat_result]:
        directory = self.nodes.get(parent)
        os.mkdir(self.nodes.child(directory, name), mode & 0o7777)
        return self._created(directory, name, "mkdir")

    def symlink(self, parent: int, name: str, target: str) -> tuple[Node, os.stat_result]:
        directory = self.nodes.get(parent)
        os.symlink(target, self.nodes.child(directory, name))
        return self._created(directory, name, "symlink")

    def readlink(self, nid: int) -> bytes:
        return os.fsencode(os.readlink(self.nodes.path(self.nodes.get(nid))))

    def link(self, nid: int, parent: int, name: str) -> tuple[Node, os.stat_result]:
        node, directory = self.nodes.get(nid), self.nodes.get(parent)
        path = self.nodes.child(directory, name)
        os.link(self.nodes.path(node), path, follow_symlinks=False)
        node.links[(parent, name)] = None
        self._record("link", Change((parent, name), None, nid))
        return node, os.lstat(path)

    def unlink(self, parent: int, name: str, directory: bool) -> None:
        node = self.nodes.lookup(self.nodes.get(parent), name)
        if directory:
            if not node.is_dir:
                raise NotADirectoryError(errno.ENOTDIR, "not a directory", name)
            if os.listdir(self.nodes.path(node)):
                raise OSError(errno.ENOTEMPTY, "directory not empty", name)
        elif node.is_dir:
            raise IsADirectoryError(errno.EISDIR, "is a directory", name)
        self.nodes.bury(node, (parent, name))
        self._record("rmdir" if directory else "unlink", Change((parent, name), node.nid, None))

    def rename(self, parent: int, name: str, new_parent: int, new_name: str, flags: int) -> None:
        source, target_dir = self.nodes.get(parent), self.nodes.get(new_parent)
        node = self.nodes.lookup(source, name)
        target = self.nodes.lookup_optional(target_dir, new_name)
        if target is node:
            return  # two names of one file: POSIX says nothing happens
        if target is not None:
            if flags:
                raise FileExistsError(errno.EEXIST, "exists", new_name)
            if target.is_dir and not node.is_dir:
                raise IsADirectoryError(errno.EISDIR, "is a directory", new_name)
            if node.is_dir and not target.is_dir:
                raise NotADirectoryError(errno.ENOTDIR, "not a directory", new_name)
            if target.is_dir and os.listdir(self.nodes.path(target)):
                raise OSError(errno.ENOTEMPTY, "directory not empty", new_name)
            self.nodes.bury(target, (new_parent, new_name))
        try:
            os.rename(self.nodes.child(source, name), self.nodes.child(target_dir, new_name))
        except OSError:
            if target is not None:
                self.nodes.raise_from_grave(target, (new_parent, new_name))
            raise
        if node.is_dir:
            node.links.clear()
        node.links.pop((parent, name), None)
        node.links[(new_parent, new_name)] = None
        self._record(
            "rename",
            Change((parent, name), node.nid, None),
            Change((new_parent, new_name), None if target is None else target.nid, node.nid),
        )

    # -- data --------------------------------------------------------------------------------

    def getattr(self, nid: int, fh: int | None = None) -> tuple[Node, os.stat_result]:
        handle = self._handles.get(fh) if fh is not None else None
        if handle is not None and handle.fd >= 0:
            return handle.node, os.fstat(handle.fd)
        node = self.nodes.get(nid)
        return node, os.lstat(self.nodes.path(node))

    def truncate(self, nid: int, size: int) -> None:
        node = self.nodes.get(nid)
        fd = os.open(self.nodes.path(node), os.O_RDWR | os.O_CLOEXEC)
        try:
            unsynced = self._unsynced(node, fd)
            displaced = self._displaced(fd, unsynced, size, max(size, unsynced.size))
            os.ftruncate(fd, size)
            unsynced.truncated(size, displaced)
        finally:
            os.close(fd)

    def chmod_chown_utime(self, nid: int, attributes: dict[str, Any]) -> None:
        path = self.nodes.path(self.nodes.get(nid))
        if "mode" in attributes:
            os.chmod(path, attributes["mode"] & 0o7777)
        if "uid" in attributes or "gid" in attributes:
            uid, gid = attributes.get("uid", -1), attributes.get("gid", -1)
            os.chown(path, uid, gid, follow_symlinks=False)
        if "times_ns" in attributes:
            os.utime(path, ns=attributes["times_ns"], follow_symlinks=False)

    def open(self, nid: int, flags: int) -> int:
        node = self.nodes.get(nid)
        path = self.nodes.path(node)
        access = flags & os.O_ACCMODE
        if access == os.O_RDONLY:
            # Not read-write: a file open for writing keeps a read-only remount of the disk
            # under the mount (the drill's Tier 2 outage) from happening at all.
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        else:
            try:  # readable too: an overwrite first reads what it replaces
                fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
            except OSError:
                fd = os.open(path, access | os.O_CLOEXEC)
        return self._handle(Handle(node, fd))

    def read(self, fh: int, offset: int, size: int) -> bytes:
        return os.pread(self._handles[fh].fd, size, offset)

    def write(self, fh: int, offset: int, data: memoryview) -> int:
        handle = self._handles[fh]
        unsynced = self._unsynced(handle.node, handle.fd)
        displaced = self._displaced(handle.fd, unsynced, offset, offset + len(data))
        written = os.pwrite(handle.fd, data, offset)
        unsynced.wrote(offset, written, displaced)
        return written

    def _unsynced(self, node: Node, fd: int) -> UnsyncedFile:
        unsynced = self.files.get(node.nid)
        if unsynced is None:
            unsynced = UnsyncedFile(os.fstat(fd).st_size, next(self._seq))
            self.files[node.nid] = unsynced
        return unsynced

    @staticmethod
    def _displaced(
        fd: int, unsynced: UnsyncedFile, start: int, end: int
    ) -> list[tuple[int, int, int, bytes]]:
        return [(s, e, w, os.pread(fd, e - s, s)) for s, e, w in unsynced.owners(start, end)]

    def release(self, fh: int) -> None:
        handle = self._handles.pop(fh, None)
        if handle is None:
            return
        if handle.fd >= 0:
            os.close(handle.fd)
        handle.node.opened -= 1
        self._collect(handle.node)

    def opendir(self, nid: int) -> int:
        node = self.nodes.get(nid)
        path = self.nodes.path(node)
        listing = [dirent(os.lstat(path).st_ino, 1, b".", 4), dirent(1, 2, b"..", 4)]
        with os.scandir(path) as entries:
            for entry in entries:
                if nid == ROOT_ID and entry.name == GRAVEYARD:
                    continue
                kind = 4 if entry.is_dir(follow_symlinks=False) else 8
                kind = 10 if entry.is_symlink() else kind
                name = os.fsencode(entry.name)
                listing.append(dirent(entry.inode(), len(listing) + 1, name, kind))
        return self._handle(Handle(node, listing=listing))

    def readdir(self, fh: int, offset: int, size: int) -> bytes:
        listing = self._handles[fh].listing or []
        out, used = [], 0
        for entry in listing[offset:]:
            if used + len(entry) > size:
                break
            out.append(entry)
            used += len(entry)
        return b"".join(out)

    def _handle(self, handle: Handle) -> int:
        fh = next(self._next_fh)
        self._handles[fh] = handle
        handle.node.opened += 1
        return fh

    # -- durability --------------------------------------------------------------------------

    def sync_began(self, nid: int) -> SyncPoint:
        """An ``fsync`` of ``nid`` began: it covers what was done before now, once it ends."""
        unsynced = self.files.get(nid)
        count = 0 if unsynced is None else len(unsynced.operations)
        return SyncPoint(nid, unsynced, count, next(self._seq))

    def fsync(self, point: SyncPoint) -> None:
        """``fsync``/``fdatasync`` of a file ended: its data up to the point it began (and,
        journaled, every name change before it) is durable."""
        unsynced = self.files.get(point.nid)
        if unsynced is not None and unsynced is point.unsynced:
            unsynced.durable = max(unsynced.durable, point.operations)
            if not unsynced.unsynced:
                del self.files[point.nid]
        if self.model == "journaled":
            self._made_durable(self.names.sync_all(point.seq))

    def fsyncdir(self, point: SyncPoint) -> None:
        if self.model == "journaled":
            self._made_durable(self.names.sync_all(point.seq))
        else:
            self._made_durable(self.names.sync_directory(point.nid, point.seq))

    def sync_everything(self) -> None:
        """Everything done so far is durable (``syncfs``; what a read-only remount does
        first)."""
        for unsynced in self.files.values():
            unsynced.durable = len(unsynced.operations)
        self.files = {nid: u for nid, u in self.files.items() if u.unsynced}
        self._made_durable(self.names.sync_all(next(self._seq)))

    def _made_durable(self, operations: list[NameOperation]) -> None:
        for nid in {nid for operation in operations for nid in operation.nodes()}:
            try:
                self._collect(self.nodes.get(nid))
            except FileNotFoundError:
                continue

    def _collect(self, node: Node) -> None:
        """Let the graveyard go of ``node`` once no power loss can need it back."""
        if node.in_graveyard and node.opened <= 0 and not self.names.referenced(node.nid):
            self.nodes.release_grave(node)
            if node.dead:
                self.files.pop(node.nid, None)

    def statfs(self) -> os.statvfs_result:
        return os.statvfs(self.nodes.root)

    def close_all(self) -> None:
        for handle in self._handles.values():
            if handle.fd >= 0:
                os.close(handle.fd)
        self._handles.clear()

    def lose_power(self, seed: int, keep: Keep = "random") -> dict[str, Any]:
        """Bring the backing directory to what a power loss leaves now (see the module)."""
        self.close_all()
        rng = random.Random(seed)
        report: dict[str, Any] = {"seed": seed, "keep": keep, "model": self.model}
        writes = kept_writes = 0
        torn: list[str] = []
        for nid, unsynced in sorted(self.files.items(), key=lambda item: item[1].first_seq):
            if not unsynced.unsynced or not (node := self._known(nid)):
                continue
            count = unsynced.unsynced
            fd = os.open(self.nodes.path(node), os.O_RDWR | os.O_CLOEXEC)
            try:
                kept = unsynced.survive(fd, _chooser(rng, keep, count))
            finally:
                os.close(fd)
            writes, kept_writes = writes + count, kept_writes + kept
            if kept < count and len(torn) < _SHOWN:
                torn.append(f"{self._relative(node)}: kept {kept} of {count}")
        operations = self.names.pending
        choose = _chooser(rng, keep, len(operations))
        dropped: list[str] = []

        def keep_name(operation: NameOperation) -> bool:
            chosen = choose(operation)
            if not chosen and len(dropped) < _SHOWN:
                dropped.append(self._describe(operation))
            return chosen

        after, now, kept_names = self.names.survivors(keep_name)
        changed = [entry for entry, node in now.items() if after[entry] != node]
        for entry in changed:
            if (was := now[entry]) is not None:
                self.nodes.bury(self.nodes.get(was), entry)
        for entry in changed:
            if (becomes := after[entry]) is not None:
                self.nodes.raise_from_grave(self.nodes.get(becomes), entry)
        self.nodes.empty_graveyard()
        report.update(
            files_with_unsynced_data=sum(1 for u in self.files.values() if u.unsynced),
            unsynced_writes=writes,
            writes_kept=kept_writes,
            unsynced_names=len(operations),
            names_kept=kept_names,
            files_cut=torn,
            names_dropped=dropped,
        )
        return report

    def _known(self, nid: int) -> Node | None:
        try:
            return self.nodes.get(nid)
        except FileNotFoundError:
            return None

    def _relative(self, node: Node) -> str:
        try:
            return os.path.relpath(self.nodes.path(node), self.nodes.root)
        except FileNotFoundError:
            return f"node {node.nid}"

    def _describe(self, operation: NameOperation) -> str:
        names = []
        for change in operation.changes:
            directory = self._known(change.entry[0])
            where = "?" if directory is None else self._relative(directory)
            names.append(os.path.normpath(os.path.join(where, change.entry[1])))
        return f"{operation.what} {' -> '.join(names)}"


def _chooser(rng: random.Random, keep: Keep, count: int) -> Callable[[Any], bool]:
    """Which of ``count`` un-synced operations, offered in order, survive: with ``random``,
    a strategy drawn per file (and once for the names): none, all, a prefix, or each with a
    drawn probability."""
    if keep != "random":
        return lambda _: keep == "all"
    strategy = rng.choice(_STRATEGIES)
    if strategy in ("none", "all"):
        return lambda _: strategy == "all"
    if strategy == "prefix":
        left = [rng.randint(0, count)]

        def prefix(_: Operation | NameOperation) -> bool:
            left[0] -= 1
            return left[0] >= 0

        return prefix
    probability = rng.random()
    return lambda _: rng.random() < probability
