"""Reading operations back from their wire form (``kind u8 | sequence u64 | body``)."""

from __future__ import annotations

from segmentstore.logs.metadata_operations import (
    CreateSegmentOperation,
    DeleteSegmentOperation,
    LoadSegmentOperation,
    MergeOperation,
    SealOperation,
    SetRetentionOperation,
    TruncateOperation,
    UpdateAttributesOperation,
)
from segmentstore.logs.operations import (
    HEADER,
    AppendOperation,
    CheckpointOperation,
    Kind,
    Operation,
)

_KINDS: dict[Kind, type[Operation]] = {
    cls.kind: cls
    for cls in (
        CheckpointOperation,
        CreateSegmentOperation,
        AppendOperation,
        SealOperation,
        TruncateOperation,
        MergeOperation,
        DeleteSegmentOperation,
        UpdateAttributesOperation,
        SetRetentionOperation,
        LoadSegmentOperation,
    )
}


def decode(data: memoryview) -> Operation:
    kind, sequence = HEADER.unpack_from(data)
    op = _KINDS[Kind(kind)]._decode_body(data[HEADER.size :])
    op.sequence = sequence
    return op
