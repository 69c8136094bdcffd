"""What a deployment records once in JetStream, beside its epochs: its container count, fixed
for its life, and whatever else its nodes must agree on from the first start on (a cluster's
Tier 2, :func:`read_record` and :func:`claim_record`)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from nats.errors import Error as NatsError
from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError

from segmentstore.tier1.errors import DataLogError, DataLogWriteError
from segmentstore.tier1.jetstream.log import connect_or_raise, epoch_bucket
from segmentstore.tier1.jetstream.nats_errors import describe
from segmentstore.tier1.jetstream.options import JetStreamOptions

_CONTAINERS = "containers"
_CLAIM_TRIES = 50
_CLAIM_PAUSE_S = 0.1


async def claim_container_count(options: JetStreamOptions, containers: int) -> None:
    """Record ``containers`` for this stream prefix, or check it against what is recorded.

    Raises ``DataLogError`` when the deployment was created with another count (segments are
    hashed to containers by that count: it can never change), ``DataLogWriteError`` when
    JetStream cannot be reached.
    """
    recorded = int(await claim_record(options, _CONTAINERS, str(containers).encode()) or b"0")
    if recorded != containers:
        raise DataLogError(
            f"the deployment {options.stream_prefix!r} was created with {recorded} containers,"
            f" not {containers}: the container count cannot change"
        )


async def read_record(options: JetStreamOptions, key: str) -> bytes | None:
    """The deployment's record ``key``; None if there is none yet."""
    async with _epochs(options) as bucket:
        try:
            return bytes((await bucket.get(key)).value or b"")
        except KeyNotFoundError:
            return None


async def claim_record(options: JetStreamOptions, key: str, value: bytes) -> bytes:
    """Record ``value`` under ``key`` unless something is recorded there already; what is
    recorded there now (``value``, or what another node recorded first).

    Nodes starting together race for it: the compare-and-set decides, and a loser reads the
    winner's record (which a read may not show for a moment yet, so it looks again)."""
    async with _epochs(options) as bucket:
        for _ in range(_CLAIM_TRIES):
            try:
                return bytes((await bucket.get(key)).value or b"")
            except KeyNotFoundError:
                pass
            try:
                await bucket.update(key, value, last=0)  # only if the key has no entry
                return value
            except KeyWrongLastSequenceError:
                await asyncio.sleep(_CLAIM_PAUSE_S)
        raise DataLogWriteError(f"cannot read the deployment's record {key!r} from JetStream")


@contextlib.asynccontextmanager
async def _epochs(options: JetStreamOptions) -> AsyncIterator[Any]:
    client = await connect_or_raise(options, f"segmentstore {options.stream_prefix}")
    try:
        yield await epoch_bucket(client.jetstream(), options)
    except (NatsError, TimeoutError) as error:
        raise DataLogWriteError(
            f"cannot read the deployment from JetStream: {describe(error)}"
        ) from error
    finally:
        await client.close()
