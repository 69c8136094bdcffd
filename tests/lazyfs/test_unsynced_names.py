"""The model of un-synced name changes: what a directory fsync makes durable, and what a
power loss leaves of the rest."""

from __future__ import annotations

from segmentstore.drill.lazyfs.unsynced_names import Change, NameOperation, UnsyncedNames

ROOT, DIR, OTHER = 1, 2, 3
FILE, TEMP = 10, 11


def _names(*operations: tuple[str, tuple[Change, ...]]) -> UnsyncedNames:
    names = UnsyncedNames()
    for seq, (what, changes) in enumerate(operations):
        names.record(NameOperation(seq, what, changes))
    return names


def test_a_directory_fsync_makes_its_changes_durable_with_what_they_depend_on() -> None:
    names = _names(
        ("create", (Change((DIR, "tmp"), None, TEMP),)),
        ("create", (Change((OTHER, "x"), None, FILE),)),
        # Renamed from DIR into OTHER: an fsync of OTHER makes the rename durable, and with it
        # the creation of what it renamed, though that happened in DIR.
        ("rename", (Change((DIR, "tmp"), TEMP, None), Change((ROOT, "final"), None, TEMP))),
    )
    durable = names.sync_directory(ROOT, before=10)
    assert [op.seq for op in durable] == [0, 2]
    assert [op.seq for op in names.pending] == [1]
    assert not names.referenced(TEMP) and names.referenced(FILE)


def test_a_sync_covers_only_what_was_done_before_it_began() -> None:
    names = _names(
        ("create", (Change((DIR, "a"), None, FILE),)),
        ("create", (Change((DIR, "b"), None, TEMP),)),
    )
    assert [op.seq for op in names.sync_directory(DIR, before=1)] == [0]
    assert [op.seq for op in names.sync_all(before=2)] == [1]


def test_a_kept_operation_whose_creation_was_dropped_is_dropped_too() -> None:
    names = _names(
        ("create", (Change((DIR, "tmp"), None, TEMP),)),
        ("rename", (Change((DIR, "tmp"), TEMP, None), Change((DIR, "final"), FILE, TEMP))),
        ("unlink", (Change((DIR, "other"), FILE + 5, None),)),
    )
    after, now, kept = names.survivors(lambda op: op.what != "create")
    assert kept == 1  # the unlink; the rename found no "tmp" to rename
    assert after == {(DIR, "tmp"): None, (DIR, "final"): FILE, (DIR, "other"): None}
    assert now == {(DIR, "tmp"): None, (DIR, "final"): TEMP, (DIR, "other"): None}
