"""What a deployment records once in JetStream: its container count, fixed for its life."""

from __future__ import annotations

import contextlib

from nats.errors import Error as NatsError
from nats.js.errors import BadRequestError, KeyNotFoundError, KeyWrongLastSequenceError

from segmentstore.tier1.errors import DataLogError, DataLogWriteError
from segmentstore.tier1.jetstream.log import connect_or_raise, epoch_bucket
from segmentstore.tier1.jetstream.options import JetStreamOptions

_KEY = "containers"


async def claim_container_count(options: JetStreamOptions, containers: int) -> None:
    """Record ``containers`` for this stream prefix, or check it against what is recorded.

    Raises ``DataLogError`` when the deployment was created with another count (segments are
    hashed to containers by that count: it can never change), ``DataLogWriteError`` when
    JetStream cannot be reached.
    """
    client = await connect_or_raise(options, f"segmentstore {options.stream_prefix}")
    try:
        bucket = await epoch_bucket(client.jetstream(), options)
        try:
            recorded = int((await bucket.get(_KEY)).value or b"0")
        except KeyNotFoundError:
            with contextlib.suppress(KeyWrongLastSequenceError, BadRequestError):
                await bucket.create(_KEY, str(containers).encode())
                return
            recorded = int((await bucket.get(_KEY)).value or b"0")
    except (NatsError, TimeoutError) as error:
        raise DataLogWriteError(f"cannot read the deployment from JetStream: {error!r}") from error
    finally:
        await client.close()
    if recorded != containers:
        raise DataLogError(
            f"the deployment {options.stream_prefix!r} was created with {recorded} containers,"
            f" not {containers}: the container count cannot change"
        )
