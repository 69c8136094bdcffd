"""Listing keys by prefix over a tree of directories, in key order, visiting only the
directories that can hold a key asked for (the file and HDFS backends; S3 lists by prefix
itself)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

# A directory's entries, by its key ("" for the root): (name, whether it is a directory, the
# object's stamp, "" if none: see ChunkStorage.list_stamped).
Children = Callable[[str], Iterable[tuple[str, bool, str]]]


def list_keys(
    children: Children, prefix: str, start_after: str | None, limit: int | None
) -> list[str]:
    """The keys under ``children`` that start with ``prefix``, after ``start_after``, in code
    point order, at most ``limit``. Names starting with ``.`` (the backends' own files) are
    never listed."""
    return [key for key, _ in list_stamped_keys(children, prefix, start_after, limit)]


def list_stamped_keys(
    children: Children, prefix: str, start_after: str | None = None, limit: int | None = None
) -> list[tuple[str, str]]:
    """:func:`list_keys` with each key's stamp."""
    found: list[tuple[str, str]] = []
    if limit is None or limit > 0:
        _walk(children, prefix.rpartition("/")[0], prefix, start_after, limit, found)
    return found


def _walk(
    children: Children,
    directory: str,
    prefix: str,
    after: str | None,
    limit: int | None,
    found: list[tuple[str, str]],
) -> bool:
    """Add the keys below ``directory`` to ``found``; True once ``limit`` is reached."""
    # Keys below a directory "d" all start with "d/": sorting a directory as "d/" puts it
    # exactly where its keys go among its siblings' keys.
    entries = sorted(children(directory), key=lambda e: e[0] + "/" if e[1] else e[0])
    for name, is_directory, stamp in entries:
        if name.startswith("."):
            continue
        key = f"{directory}/{name}" if directory else name
        if is_directory:
            below = key + "/"
            if not (below.startswith(prefix) or prefix.startswith(below)):
                continue  # no key below it starts with the prefix
            if after is not None and after >= below and not after.startswith(below):
                continue  # every key below it sorts before start_after
            if _walk(children, key, prefix, after, limit, found):
                return True
        elif key.startswith(prefix) and (after is None or key > after):
            found.append((key, stamp))
            if limit is not None and len(found) >= limit:
                return True
    return False
