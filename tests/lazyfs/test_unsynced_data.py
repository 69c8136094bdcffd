"""The model of a file's un-synced data, against a plain one: any subset of the operations
since the last sync, replayed over the durable content, is what ``survive`` leaves."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from segmentstore.drill.lazyfs.unsynced_data import Truncate, UnsyncedFile, Write

_write = st.tuples(st.just("write"), st.integers(0, 96), st.binary(min_size=1, max_size=40))
_truncate = st.tuples(st.just("truncate"), st.integers(0, 96), st.just(b""))
_sync = st.tuples(st.just("sync"), st.just(0), st.just(b""))
_operations = st.lists(st.one_of(_write, _write, _truncate, _sync), max_size=25)


def _apply(content: bytes, kind: str, at: int, data: bytes) -> bytes:
    if kind == "write":
        return content[:at].ljust(at, b"\0") + data + content[at + len(data) :]
    return content[:at].ljust(at, b"\0")


def _read(fd: int, owners: list[tuple[int, int, int]]) -> list[tuple[int, int, int, bytes]]:
    """What the file holds where those writers' bytes are about to be replaced."""
    return [(s, e, w, os.pread(fd, e - s, s)) for s, e, w in owners]


@settings(max_examples=300, deadline=None)
@given(
    initial=st.binary(max_size=64),
    operations=_operations,
    keep=st.lists(st.booleans(), min_size=25, max_size=25),
    synced_in_flight=st.integers(0, 25),
)
def test_what_survives_is_the_durable_content_plus_the_kept_operations(
    initial: bytes,
    operations: list[tuple[str, int, bytes]],
    keep: list[bool],
    synced_in_flight: int,
) -> None:
    fd, name = tempfile.mkstemp(prefix="lazyfs-model-")
    path = Path(name)
    os.write(fd, initial)
    try:
        model = UnsyncedFile(len(initial), 0)
        durable, since = initial, []  # the reference: durable bytes, operations since
        current = initial
        for kind, at, data in operations:
            if kind == "sync":
                model = UnsyncedFile(len(current), 0)  # what LazyFS does on a full sync
                durable, since = current, []
                continue
            if kind == "write":
                end = at + len(data)
                displaced = _read(fd, model.owners(at, end))
                os.pwrite(fd, data, at)
                model.wrote(at, len(data), displaced)
            else:
                displaced = _read(fd, model.owners(at, model.size))
                os.ftruncate(fd, at)
                model.truncated(at, displaced)
            since.append((kind, at, data))
            current = _apply(current, kind, at, data)
        assert path.read_bytes() == current
        # An fsync that began after the first few operations and ended: those are durable.
        model.durable = min(synced_in_flight, len(model.operations))
        choices = iter(keep)
        model.survive(fd, lambda operation: next(choices))
        expected = durable
        choices = iter(keep)
        for i, (kind, at, data) in enumerate(since):
            if i < model.durable or next(choices):
                expected = _apply(expected, kind, at, data)
        assert path.read_bytes() == expected
    finally:
        os.close(fd)
        path.unlink()


def test_appends_save_nothing_and_operations_are_recorded_in_order(tmp_path: Path) -> None:
    model = UnsyncedFile(10, 0)
    model.wrote(10, 5, [])
    model.wrote(15, 5, [])
    model.truncated(12, [(12, 20, 0, b"x" * 8)])
    assert model.operations == [Write(0, 10, 5), Write(1, 15, 5), Truncate(12)]
    assert model.owners(0, 100) == [(0, 10, -1), (10, 12, 0)]
    assert model.unsynced == 3
