"""Shared by the Storage Writer tests: a store over a local Tier 2, and ways to look at what
Tier 2 holds (files, manifests, the ``segmentstore tier2`` command line as a real process)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from store_checks import stored_segment
from tier2_cli import run_tier2_cli

from segmentstore import (
    SegmentStore,
)
from segmentstore.tier2 import (
    ChunkStorage,
    ManifestStore,
    SegmentManifest,
    chunks_of,
    open_chunk_storage,
)

KiB = 1024
MiB = 1024 * KiB
# Flush almost at once, in chunks small enough that a few appends roll several of them.
WRITER = {"flush_threshold_bytes": 1024, "flush_interval_ms": 50, "max_chunk_bytes": 64 * KiB}
# For tests that decide themselves when Tier 2 catches up (flush_all): the writer never
# flushes on its own within a test.
MANUAL = {"flush_threshold_bytes": 64 * MiB, "flush_interval_ms": 600_000}
CHUNK_DIR = re.compile(r"chunks/[0-9a-f]{2}")


# -- helpers ------------------------------------------------------------------------------


def open_store(data: Path, **overrides: Any) -> SegmentStore:
    writer = {**WRITER, **overrides.pop("storage_writer", {})}
    return SegmentStore.open(data, storage_writer=writer, **overrides)


def tier2_root(data: Path) -> Path:
    return data / "tier2"


def tier2_files(data: Path) -> list[str]:
    """Every file under the Tier 2 directory (dot files too), relative, sorted."""
    root = tier2_root(data)
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def chunk_files(data: Path, name: str) -> list[str]:
    """The chunks of ``name`` (not their time index sidecars)."""
    prefix = chunks_of(name)
    return [f for f in tier2_files(data) if f.startswith(prefix) and not f.endswith(".tidx")]


def sidecar_files(data: Path, name: str) -> list[str]:
    prefix = chunks_of(name)
    return [f for f in tier2_files(data) if f.startswith(prefix) and f.endswith(".tidx")]


def storage_of(data: Path) -> ChunkStorage:
    return open_chunk_storage(tier2_root(data).as_uri())


def load_manifest(data: Path, name: str) -> SegmentManifest | None:
    storage = storage_of(data)
    try:
        loaded = ManifestStore(storage).load(name)
    finally:
        storage.close()
    return None if loaded is None else loaded[0]


def tier2_bytes(data: Path, name: str) -> tuple[SegmentManifest, bytes]:
    """The manifest and every byte it names, ``[start_offset, storage_length)``."""
    return stored_segment(storage_of(data), name)


async def cli(*args: str) -> tuple[int, bytes, str]:
    """``segmentstore tier2 ARGS`` in a process of its own, as a user runs it."""
    return await run_tier2_cli(*args)
