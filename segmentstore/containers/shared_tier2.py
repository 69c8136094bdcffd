"""One Tier 2 per cluster: the cluster records its Tier 2's identity, and a node whose Tier 2
is another is refused at start.

The identity is the id of the Tier 2's marker object (:mod:`segmentstore.tier2.deployment_marker`)
with its URI, recorded once beside the epochs in JetStream and signed with the cluster's
secret. The first node writes the marker (unless its Tier 2 has one) and the record; every
later node reads the record first and checks its own Tier 2's marker against it, writing
nothing in a Tier 2 that is not the cluster's.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from segmentstore.containers.startup_wait import retry_while_starting
from segmentstore.contracts.errors import InvalidArgumentError
from segmentstore.tier1 import DataLogError, DataLogWriteError
from segmentstore.tier1.signing import Signer
from segmentstore.tier2 import ChunkStorage, Tier2Error, Tier2UnavailableError
from segmentstore.tier2.deployment_marker import MARKER_KEY, ensure_marker, read_marker

if TYPE_CHECKING:
    from segmentstore.tier1.jetstream import JetStreamOptions

log = logging.getLogger(__name__)

_RECORD = "tier2"


async def claim_shared_tier2(
    jetstream: JetStreamOptions,
    storage: ChunkStorage,
    uri: str,
    secret: bytes,
    patience_s: float,
) -> None:
    """:func:`check_shared_tier2`, waiting up to ``patience_s`` for JetStream or Tier 2 to
    answer; ``InvalidArgumentError`` for everything that stops the node from starting."""

    def gave_up(error: BaseException) -> InvalidArgumentError:
        return InvalidArgumentError(f"cannot check the cluster's Tier 2: {error}")

    async def check() -> None:
        try:
            await check_shared_tier2(jetstream, storage, uri, secret)
        except (DataLogWriteError, Tier2UnavailableError):
            raise
        except (DataLogError, Tier2Error) as error:
            raise gave_up(error) from error

    await retry_while_starting(
        check,
        transient=(DataLogWriteError, Tier2UnavailableError),
        patience_s=patience_s,
        not_yet="cannot check the cluster's Tier 2 yet",
        gave_up=gave_up,
    )


async def check_shared_tier2(
    jetstream: JetStreamOptions, storage: ChunkStorage, uri: str, secret: bytes
) -> None:
    """Check that ``storage`` (at ``uri``) is the Tier 2 the cluster records, recording it if
    this is the cluster's first start; ``InvalidArgumentError`` naming both locations if
    not. JetStream errors (``DataLogError``) pass through."""
    from segmentstore.tier1.jetstream import claim_record, read_record
    from segmentstore.tier1.jetstream.lease_entries import decode, encode

    signer = Signer(secret, "deployment records")
    bucket = jetstream.epoch_bucket
    recorded = await read_record(jetstream, _RECORD)
    marker: str | None
    if recorded is None:
        marker = await asyncio.to_thread(ensure_marker, storage)
        mine = encode(signer, bucket, _RECORD, {"uri": uri, "marker": marker})
        recorded = await claim_record(jetstream, _RECORD, mine)
    else:
        marker = await asyncio.to_thread(read_marker, storage)
    fields = decode(signer, bucket, _RECORD, recorded, None, 0)
    if fields is None:
        raise InvalidArgumentError(
            f"the cluster's record of its Tier 2 (key {_RECORD!r} in the JetStream bucket"
            f" {bucket}) is not signed with this node's cluster secret: this node was given"
            " another secret than the cluster's, or the record was tampered with"
        )
    if marker != fields.get("marker"):
        why = (
            f"it has no {MARKER_KEY}"
            if marker is None
            else f"its {MARKER_KEY} names another deployment ({marker})"
        )
        raise InvalidArgumentError(
            f"this node's Tier 2 {uri} is not the cluster's Tier 2 {fields.get('uri')} ({why});"
            " every node of a cluster must use the same Tier 2 (tier2.uri, --tier2)"
        )
