"""Data frames: operations packed by DataFrameBuilder read back whole and in order."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from segmentstore.logs.data_frame import DataFrameBuilder, DataFrameReader, Frame
from segmentstore.logs.operations import AppendOperation, CheckpointOperation, Operation


def _append(index: int, size: int) -> AppendOperation:
    op = AppendOperation("s", bytes([index % 251]) * size)
    op.sequence = index + 1
    op.segment_id = 7
    op.offset = index
    return op


def _bytes_of(frame: Frame) -> bytes:
    return b"".join(bytes(part) for part in frame.parts)


def _read_back(frames: list[Frame], reader: DataFrameReader) -> list[Operation]:
    ops: list[Operation] = []
    for frame in frames:
        data = _bytes_of(frame)
        assert len(data) == frame.size
        ops.extend(reader.read(0, data))
    return ops


@settings(max_examples=150, deadline=None)
@given(
    max_frame=st.sampled_from([4096, 9000, 70_000]),
    sizes=st.lists(
        st.one_of(st.integers(1, 3000), st.sampled_from([16 * 1024 - 40, 20_000, 150_000])),
        min_size=1,
        max_size=40,
    ),
    takes=st.sets(st.integers(0, 40)),
)
def test_operations_read_back_whole_and_in_order(
    max_frame: int, sizes: list[int], takes: set[int]
) -> None:
    builder = DataFrameBuilder(max_frame)
    reader = DataFrameReader()
    ops = [_append(i, size) for i, size in enumerate(sizes)]
    read: list[Operation] = []
    for i, op in enumerate(ops):
        builder.add(op)
        if i in takes:  # a window ends here: its frames go to Tier 1
            frames = builder.take_frames()
            assert all(frame.size <= max_frame for frame in frames)
            read += _read_back(frames, reader)
    read += _read_back(builder.take_frames(), reader)
    assert [(op.sequence, bytes(op.data)) for op in read] == [  # type: ignore[attr-defined]
        (op.sequence, bytes(op.data)) for op in ops
    ]


def test_small_operations_share_one_buffer() -> None:
    # Tier 1 checksums and writes each part: a frame of small appends must not be one part
    # per append.
    builder = DataFrameBuilder(1 << 20)
    for i in range(100):
        builder.add(_append(i, 1000))
    (frame,) = builder.take_frames()
    assert len(frame.parts) == 2  # the version byte, then every entry joined


def test_large_payload_is_referenced_not_copied() -> None:
    builder = DataFrameBuilder(1 << 20)
    builder.add(_append(0, 10))
    big = _append(1, 200_000)
    builder.add(big)
    builder.add(_append(2, 10))
    (frame,) = builder.take_frames()
    assert any(isinstance(part, memoryview) and part.obj is big.data for part in frame.parts)
    ops = _read_back([frame], DataFrameReader())
    assert [bytes(op.data) for op in ops] == [  # type: ignore[attr-defined]
        b"\x00" * 10,
        b"\x01" * 200_000,
        b"\x02" * 10,
    ]


def test_metadata_operations_travel_with_appends() -> None:
    builder = DataFrameBuilder(4096)
    checkpoint = CheckpointOperation({"segments": {}})
    checkpoint.sequence = 2
    builder.add(_append(0, 3000))
    builder.add(checkpoint)
    builder.add(_append(2, 3000))
    ops = _read_back(builder.take_frames(), DataFrameReader())
    assert [type(op).__name__ for op in ops] == [
        "AppendOperation",
        "CheckpointOperation",
        "AppendOperation",
    ]
    assert ops[1].snapshot == {"segments": {}}  # type: ignore[attr-defined]


@settings(max_examples=100, deadline=None)
@given(
    max_frame=st.sampled_from([4096, 9000, 70_000]),
    ops=st.lists(
        st.tuples(
            st.one_of(st.integers(1, 3000), st.sampled_from([16 * 1024 - 40, 20_000])),
            st.sampled_from([None, "writer-1"]),
            st.booleans(),  # a checkpoint follows
        ),
        min_size=1,
        max_size=40,
    ),
)
def test_add_all_frames_exactly_as_add_does(
    max_frame: int, ops: list[tuple[int, str | None, bool]]
) -> None:
    # add_all's shortcut for small appends must write the very bytes add writes.
    def built(one_by_one: bool) -> list[bytes]:
        builder = DataFrameBuilder(max_frame)
        window: list[Operation] = []
        for i, (size, writer_id, checkpoint_follows) in enumerate(ops):
            op = _append(i, size)
            op.time_ms = 1_700_000_000_000 + i
            if writer_id is not None:
                op.writer_id, op.writer_seq = writer_id, i
            window.append(op)
            if checkpoint_follows:
                checkpoint = CheckpointOperation({"segments": {}})
                checkpoint.sequence = i + 1
                window.append(checkpoint)
        if one_by_one:
            for op in window:
                builder.add(op)
        else:
            builder.add_all(window)
        return [_bytes_of(frame) for frame in builder.take_frames()]

    assert built(one_by_one=False) == built(one_by_one=True)
