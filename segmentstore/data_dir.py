"""A data directory's identity: ``store.json`` fixes its container count for the life of the
data, so that a store opened with another count is refused instead of misplacing segments.

The identity is written only once every container's local Tier 1 directory exists: from then
on, a container directory that is missing was lost, never not yet made."""

from __future__ import annotations

import json
import os
from pathlib import Path

from segmentstore.contracts.errors import InvalidArgumentError

IDENTITY_FILE = "store.json"
TIER1_DIR = "tier1"  # the local Tier 1 logs, one directory per container


def container_tier1_dir(data_dir: Path, container: int) -> Path:
    """Where container ``container`` keeps its local Tier 1 log."""
    return data_dir / TIER1_DIR / f"container-{container:04d}"


def claim_data_dir(data_dir: Path, containers: int) -> None:
    """Create ``data_dir``, a Tier 1 directory per container and the identity with
    ``containers``, or check the recorded count (``InvalidArgumentError`` if it differs). The
    identity is written durably and whole, after the directories."""
    make_directories(data_dir)
    identity = data_dir / IDENTITY_FILE
    if identity.exists():
        recorded = json.loads(identity.read_text())["containers"]
        if recorded != containers:
            raise InvalidArgumentError(
                f"{data_dir} was created with {recorded} containers, not {containers}:"
                " the container count cannot change"
            )
        return
    for container in range(containers):
        container_tier1_dir(data_dir, container).mkdir(parents=True, exist_ok=True)
    sync_directory(data_dir / TIER1_DIR)
    sync_directory(data_dir)  # the directories are durable before the identity is
    temporary = identity.with_suffix(".tmp")
    with open(temporary, "w") as f:
        json.dump({"format": 1, "containers": containers}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, identity)
    sync_directory(data_dir)


def make_directories(path: Path) -> None:
    """``mkdir -p`` whose every new directory is durable: its parent is fsynced once it is made
    (a directory's name, like a file's, survives a power loss only once its parent is synced;
    a data directory made and lost so would take everything acknowledged in it along)."""
    if path.is_dir():
        return
    make_directories(path.parent)
    try:
        path.mkdir()
    except FileExistsError:
        return
    sync_directory(path.parent)


def sync_directory(path: Path) -> None:
    """Make the names in directory ``path`` (files created, replaced, removed) durable."""
    directory = os.open(path, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
