"""Tier 1 on NATS JetStream: a replicated durable data log per container (nats-py).

:class:`JetStreamDurableDataLog` keeps container ``N``'s log in the stream
``<prefix>-container-N`` (file storage, ``replicas`` copies) and its epoch in the key-value
bucket ``<prefix>-epochs``. Using the log needs ``nats-py`` (the ``cluster`` extra); its options
(:mod:`.options`, the settings tree's ``tier1.jetstream`` section) do not, so the names below
load on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from segmentstore.tier1.jetstream.deployment import (
        claim_container_count as claim_container_count,
    )
    from segmentstore.tier1.jetstream.deployment import claim_record as claim_record
    from segmentstore.tier1.jetstream.deployment import read_record as read_record
    from segmentstore.tier1.jetstream.log import JetStreamDurableDataLog as JetStreamDurableDataLog
    from segmentstore.tier1.jetstream.options import JetStreamOptions as JetStreamOptions

_HOMES = {
    "JetStreamDurableDataLog": "segmentstore.tier1.jetstream.log",
    "JetStreamOptions": "segmentstore.tier1.jetstream.options",
    "claim_container_count": "segmentstore.tier1.jetstream.deployment",
    "claim_record": "segmentstore.tier1.jetstream.deployment",
    "read_record": "segmentstore.tier1.jetstream.deployment",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
