"""``segmentstore tier2 ls`` and ``cat``: Tier 2 read through manifests alone, no service."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import BinaryIO, TextIO

from segmentstore.tier2 import (
    ChunkStorage,
    ManifestStore,
    SegmentReader,
    Tier2Error,
    open_chunk_storage,
)
from segmentstore.tier2.layout_migration import migrate_layout

_PIECE = 8 << 20


def _open(uri: str, options: Mapping[str, str]) -> ChunkStorage | None:
    """The storage of a location that must exist (reading never creates one); None, and the
    error on stderr, if it cannot be opened."""
    try:
        return open_chunk_storage(uri, options=dict(options), must_exist=True)
    except Tier2Error as error:
        sys.stderr.write(f"segmentstore: {error}\n")
        return None


def list_segments(uri: str, prefix: str, options: Mapping[str, str], out: TextIO) -> int:
    """The segments whose names start with ``prefix``. A location that does not exist is an
    error; so is a damaged manifest of a listed segment, or one whose segment is unknown
    (both reported on stderr after the listing); a prefix that matches nothing, a warning."""
    storage = _open(uri, options)
    if storage is None:
        return 1
    try:
        reader = SegmentReader(storage)
        manifests, unreadable = reader.scan_segments(prefix)
        holds_any = bool(manifests or unreadable) or reader.holds_any_segment()
    except Tier2Error as error:
        sys.stderr.write(f"segmentstore: {error}\n")
        return 1
    finally:
        storage.close()
    out.write(f"{'start_offset':>14} {'storage_length':>16} {'sealed':>6}  name\n")
    for m in manifests:
        out.write(
            f"{m.start_offset:>14} {m.storage_length:>16} {str(m.sealed).lower():>6}  {m.name}\n"
        )
    out.flush()
    for broken in unreadable:
        sys.stderr.write(
            f"segmentstore: the manifest {broken.key} of {broken.name!r} cannot be read:"
            f" {broken.reason}\n"
        )
    if not manifests and not unreadable:
        empty = "" if holds_any else " (it holds no segment at all)"
        sys.stderr.write(
            f"segmentstore: warning: no segment in {uri} starts with {prefix!r}{empty}\n"
        )
    return 1 if unreadable else 0


def cat_segment(
    uri: str,
    name: str,
    offset: int | None,
    length: int | None,
    options: Mapping[str, str],
    out: BinaryIO,
) -> int:
    """Write the segment's bytes from ``offset`` (default: its start) for ``length`` bytes
    (default: to its storage length), all read through one manifest."""
    storage = _open(uri, options)
    if storage is None:
        return 1
    try:
        reader = SegmentReader(storage)
        found = ManifestStore(storage).load(name)
        if found is None:
            sys.stderr.write(f"segmentstore: no segment {name!r} in {uri}\n")
            return 1
        manifest = found[0]
        position = manifest.start_offset if offset is None else offset
        if position < manifest.start_offset:
            sys.stderr.write(f"segmentstore: {name!r} is truncated below {manifest.start_offset}\n")
            return 1
        end = (
            manifest.storage_length
            if length is None
            else min(position + length, manifest.storage_length)
        )
        while position < end:
            data = reader.read_from(manifest, position, min(_PIECE, end - position))
            out.write(data)
            position += len(data)
        out.flush()
        return 0
    except Tier2Error as error:
        sys.stderr.write(f"segmentstore: {error}\n")
        return 1
    finally:
        storage.close()


def migrate(uri: str, options: Mapping[str, str], out: TextIO) -> int:
    """Rewrite the manifests of an earlier version's layout (``tier2.layout_migration``),
    saying how far it got as it goes."""
    storage = _open(uri, options)
    if storage is None:
        return 1

    def progress(done: int) -> None:
        out.write(f"{done} segments migrated so far\n")
        out.flush()

    try:
        report = migrate_layout(storage, progress)
    except Tier2Error as error:
        sys.stderr.write(f"segmentstore: {error} (run it again to go on)\n")
        return 1
    finally:
        storage.close()
    out.write(
        f"{report.migrated} segments migrated, {report.already} were already"
        f" ({len(report.unreadable or [])} unreadable)\n"
    )
    for problem in report.unreadable or []:
        sys.stderr.write(f"segmentstore: not migrated: {problem}\n")
    return 1 if report.unreadable else 0
