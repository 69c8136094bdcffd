"""Tier 1 on NATS JetStream: a replicated durable data log per container (nats-py).

:class:`JetStreamDurableDataLog` keeps container ``N``'s log in the stream
``<prefix>-container-N`` (file storage, ``replicas`` copies) and its epoch in the key-value
bucket ``<prefix>-epochs``. Importing this package needs ``nats-py`` (the ``cluster`` extra).
"""

from segmentstore.tier1.jetstream.deployment import (
    claim_container_count,
    claim_record,
    read_record,
)
from segmentstore.tier1.jetstream.log import JetStreamDurableDataLog
from segmentstore.tier1.jetstream.options import JetStreamOptions

__all__ = [
    "JetStreamDurableDataLog",
    "JetStreamOptions",
    "claim_container_count",
    "claim_record",
    "read_record",
]
