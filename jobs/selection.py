"""Which segments a read selects: their manifests, read once, and what to say about the rest.

* A segment named exactly must have a manifest (for a batch read; a stream waits for it).
* A manifest that cannot be read fails only the reads that include its segment: with
  ``fail_on_data_loss=true`` a :class:`~segmentstore.jobs.errors.DataLossError` naming the
  segment and the manifest, with ``false`` a warning and the segment left out. A manifest's
  key spells its segment's name, so even a damaged one is matched against the selection.
* A selection that matches nothing logs a warning, saying whether the location holds any
  segment at all (a mistyped prefix in the URI looks like that). The location itself must
  exist: the storage is opened with ``must_exist`` (:func:`open_read_storage`).
"""

from __future__ import annotations

import logging
from collections.abc import MutableSet

from segmentstore.jobs.errors import DataLossError, ScanOptionsError
from segmentstore.jobs.options import ScanOptions
from segmentstore.tier2 import (
    ChunkStorage,
    InvalidManifestError,
    ManifestsSeen,
    ManifestStore,
    SegmentManifest,
    SegmentReader,
    UnreadableManifest,
    manifest_key,
    open_chunk_storage,
)

log = logging.getLogger(__name__)


def open_read_storage(uri: str, options: dict[str, str]) -> ChunkStorage:
    """The chunk storage of a Tier 2 location that must already exist (reads never create
    one: a mistyped URI is an error, not an empty location)."""
    return open_chunk_storage(uri, options=options, must_exist=True)


def select_segments(
    options: ScanOptions,
    storage: ChunkStorage,
    *,
    required: bool = True,
    warned: MutableSet[str] | None = None,
    seen: ManifestsSeen | None = None,
) -> list[SegmentManifest]:
    """The manifests of the selected segments, by name. A named segment without one is an
    error if ``required``, else left out (a stream waits for its first flush). ``warned``
    collects what was already warned about, so that a stream, which selects again for every
    micro-batch, says each thing once; ``seen`` keeps the manifests it read, so that it reads
    again only those that changed (a listing tells)."""
    warned = set() if warned is None else warned
    selection = options.segments
    found: dict[str, SegmentManifest] = {}
    unreadable: list[UnreadableManifest] = []
    store = ManifestStore(storage)
    for name in selection.names:
        try:
            loaded = store.load(name)
        except InvalidManifestError as e:
            unreadable.append(UnreadableManifest(manifest_key(name), name, e.reason))
            continue
        if loaded is None and required:
            raise ScanOptionsError(
                f"segment {name!r} has no manifest in Tier 2 at {storage.uri} "
                "(it does not exist, or nothing of it has been flushed yet)"
            )
        if loaded is not None:
            found[name] = loaded[0]
    reader = SegmentReader(storage)
    for prefix in _outermost(selection.prefixes):
        listed, damaged = reader.scan_segments(prefix, seen=seen)
        for manifest in listed:
            found.setdefault(manifest.name, manifest)
        for broken in damaged:
            if broken.name not in found:
                unreadable.append(broken)
    for broken in unreadable:
        _unreadable(broken, storage.uri, options.fail_on_data_loss, warned)
    if not found and not unreadable:
        _nothing_matches(options, storage, warned)
    return [found[name] for name in sorted(found)]


def _outermost(prefixes: tuple[str, ...]) -> list[str]:
    """The prefixes that no other one contains: each listed once (manifest keys spell names,
    so each prefix is one range of keys, and a listing reads only what it selects)."""
    ordered = sorted(set(prefixes))
    kept: list[str] = []
    for prefix in ordered:
        if not kept or not prefix.startswith(kept[-1]):
            kept.append(prefix)
    return kept


def _unreadable(
    broken: UnreadableManifest, uri: str, fail_on_data_loss: bool, warned: MutableSet[str]
) -> None:
    reason = f"its manifest {broken.key} in Tier 2 at {uri} cannot be read: {broken.reason}"
    if fail_on_data_loss:
        raise DataLossError(broken.name, reason)
    _warn_once(warned, broken.key, "segment %r is left out: %s", broken.name, reason)


def _nothing_matches(options: ScanOptions, storage: ChunkStorage, warned: MutableSet[str]) -> None:
    selection = options.segments.describe()
    empty = "" if SegmentReader(storage).holds_any_segment() else " (it holds no segment at all)"
    _warn_once(
        warned,
        "nothing matches",
        "no segment in Tier 2 at %s matches segments=%s%s",
        storage.uri,
        selection,
        empty,
    )


def _warn_once(warned: MutableSet[str], key: str, message: str, *args: object) -> None:
    if key not in warned:
        warned.add(key)
        log.warning(message, *args)
