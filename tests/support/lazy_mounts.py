"""Mounting lazyfs in a test: skipped with the reason where FUSE cannot be mounted."""

from __future__ import annotations

from pathlib import Path

import pytest

from segmentstore.drill.lazyfs import FuseUnavailable, LazyMount


def mount_or_skip(root: Path, model: str = "strict", fsync_ms: float = 0.0) -> LazyMount:
    """lazyfs at ``root/mnt`` over ``root/disk``; the caller unmounts it."""
    mount = LazyMount(
        root / "disk", root / "mnt", model=model, fsync_ms=fsync_ms, log=root / "lazyfs.log"
    )
    try:
        mount.mount()
    except FuseUnavailable as reason:
        pytest.skip(f"FUSE cannot be mounted here: {reason}")
    return mount
