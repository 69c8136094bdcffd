"""The directory entries that no directory ``fsync`` has made durable yet.

Every creation (file, directory, hard or symbolic link), removal and rename is an operation
that changes one or two *entries*, an entry being ``(directory node, name)`` and its value the
node it names (or nothing). Operations stay pending, in order, until one of the two models
makes them durable:

``strict`` (POSIX, the default)
    an ``fsync`` of a directory makes durable the pending operations that change an entry of
    that directory; a file's own ``fsync`` makes none of its names durable. A rename from one
    directory to another is one operation: an ``fsync`` of either directory makes it durable.
``journaled`` (as ext4 and XFS behave in practice)
    any ``fsync`` or ``fdatasync`` makes every pending operation durable, as the commit of a
    metadata journal does.

Either way an operation is made durable with every earlier pending one that changed an entry
it changes (transitively): a rename cannot survive without the creation of what it renamed.

On a power loss each pending operation is kept or dropped; the kept ones are replayed in order
over the durable entries, and one whose entries no longer hold what it found (its creation was
dropped, say) is dropped too. What the entries end up naming is what survives.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

Entry = tuple[int, str]  # (directory node id, name)


@dataclass(frozen=True, slots=True)
class Change:
    entry: Entry
    old: int | None  # the node the entry named before, or None
    new: int | None


@dataclass(frozen=True, slots=True)
class NameOperation:
    seq: int
    what: str  # "create", "mkdir", "link", "unlink", "rmdir", "rename", "symlink"
    changes: tuple[Change, ...]

    def touches_directory(self, directory: int) -> bool:
        return any(change.entry[0] == directory for change in self.changes)

    def nodes(self) -> set[int]:
        found = {c.old for c in self.changes} | {c.new for c in self.changes}
        found.discard(None)
        return {node for node in found if node is not None}


class UnsyncedNames:
    def __init__(self) -> None:
        self.pending: list[NameOperation] = []
        self._references: Counter[int] = Counter()

    def record(self, operation: NameOperation) -> None:
        self.pending.append(operation)
        self._references.update(operation.nodes())

    def referenced(self, node: int) -> bool:
        """Whether a pending operation names ``node``: a power loss may need it back."""
        return self._references[node] > 0

    def sync_directory(self, directory: int, before: int) -> list[NameOperation]:
        """Make durable what an ``fsync`` of ``directory`` that began when the next operation
        would have been numbered ``before`` does; return those operations."""
        return self._make_durable(
            lambda operation: operation.seq < before and operation.touches_directory(directory)
        )

    def sync_all(self, before: int) -> list[NameOperation]:
        return self._make_durable(lambda operation: operation.seq < before)

    def _make_durable(self, chosen: Callable[[NameOperation], bool]) -> list[NameOperation]:
        entries: set[Entry] = set()
        durable: list[NameOperation] = []
        remaining: list[NameOperation] = []
        for operation in reversed(self.pending):
            mine = {change.entry for change in operation.changes}
            if chosen(operation) or mine & entries:
                entries |= mine
                durable.append(operation)
                self._references.subtract(operation.nodes())
            else:
                remaining.append(operation)
        remaining.reverse()
        durable.reverse()
        self.pending = remaining
        return durable

    def survivors(
        self, keep: Callable[[NameOperation], bool]
    ) -> tuple[dict[Entry, int | None], dict[Entry, int | None], int]:
        """After a power loss that keeps what ``keep`` chooses: (what each entry an operation
        changed names then, what it names now, how many operations survived)."""
        now: dict[Entry, int | None] = {}
        durable: dict[Entry, int | None] = {}
        for operation in self.pending:
            for change in operation.changes:
                durable.setdefault(change.entry, change.old)
                now[change.entry] = change.new
        after = dict(durable)
        kept = 0
        for operation in self.pending:
            if not keep(operation):
                continue
            if all(after[change.entry] == change.old for change in operation.changes):
                for change in operation.changes:
                    after[change.entry] = change.new
                kept += 1
        return after, now, kept
