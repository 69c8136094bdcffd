"""A lazyfs mount per test: ``mounted(tmp_path)`` mounts ``tmp_path/mnt`` over ``tmp_path/disk``
and unmounts it on the way out, whatever happened; where FUSE cannot be mounted the test is
skipped with the reason."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from lazy_mounts import mount_or_skip

from segmentstore.drill.lazyfs import LazyMount
from segmentstore.drill.lazyfs.kernel import mounted_here


@pytest.fixture
def lazy(tmp_path: Path) -> Iterator[LazyMount]:
    mount = mount_or_skip(tmp_path, fsync_ms=0)
    try:
        yield mount
    finally:
        mount.unmount()
        assert not mounted_here(mount.mountpoint)


@pytest.fixture
def journaled(tmp_path: Path) -> Iterator[LazyMount]:
    mount = mount_or_skip(tmp_path, model="journaled", fsync_ms=0)
    try:
        yield mount
    finally:
        mount.unmount()
