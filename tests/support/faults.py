"""Bugs injected into a running store, to see that its failure handling holds (``tests/support``
is on pytest's ``pythonpath``)."""

from __future__ import annotations

import pytest

from segmentstore.logs.operations import AppendOperation
from segmentstore.metadata.container_metadata import ContainerMetadata


def fail_processing_of(monkeypatch: pytest.MonkeyPatch, payload: bytes) -> None:
    """From now on, the operation processor raises (a bug, not a refusal) when it prepares an
    append of exactly ``payload``: that append's container fails."""
    prepare = AppendOperation.prepare

    def failing_prepare(op: AppendOperation, metadata: ContainerMetadata) -> bool:
        if bytes(op.data) == payload:
            raise RuntimeError("injected")
        return prepare(op, metadata)

    monkeypatch.setattr(AppendOperation, "prepare", failing_prepare)
