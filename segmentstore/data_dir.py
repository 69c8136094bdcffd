"""A data directory's identity: ``store.json`` fixes its container count for the life of the
data, so that a store opened with another count is refused instead of misplacing segments."""

from __future__ import annotations

import json
import os
from pathlib import Path

from segmentstore.errors import InvalidArgumentError

IDENTITY_FILE = "store.json"


def claim_data_dir(data_dir: Path, containers: int) -> None:
    """Create ``data_dir`` and its identity with ``containers``, or check the recorded count
    (``InvalidArgumentError`` if it differs). The identity is written durably and whole."""
    data_dir.mkdir(parents=True, exist_ok=True)
    identity = data_dir / IDENTITY_FILE
    if identity.exists():
        recorded = json.loads(identity.read_text())["containers"]
        if recorded != containers:
            raise InvalidArgumentError(
                f"{data_dir} was created with {recorded} containers, not {containers}:"
                " the container count cannot change"
            )
        return
    temporary = identity.with_suffix(".tmp")
    with open(temporary, "w") as f:
        json.dump({"format": 1, "containers": containers}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, identity)
    sync_directory(data_dir)


def sync_directory(path: Path) -> None:
    """Make the names in directory ``path`` (files created, replaced, removed) durable."""
    directory = os.open(path, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
