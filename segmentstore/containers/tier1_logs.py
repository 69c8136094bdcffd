"""Which Tier 1 log a container gets: a local write-ahead log under the data directory, or a
replicated stream on NATS JetStream (``tier1.mode``), and what a shared Tier 1 records once."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING

from segmentstore.contracts.errors import InvalidArgumentError
from segmentstore.data_dir import container_tier1_dir
from segmentstore.settings import Tier1Settings
from segmentstore.tier1 import DataLogError, DataLogWriteError, DurableDataLog
from segmentstore.tier1.local import LocalDurableDataLog

if TYPE_CHECKING:
    from segmentstore.tier1.jetstream import JetStreamOptions

log = logging.getLogger(__name__)

_PATIENCE_S = 60.0  # how long a starting node waits for JetStream before it gives up


def tier1_log(
    data_dir: Path, tier1: Tier1Settings, jetstream: JetStreamOptions | None, container_id: int
) -> DurableDataLog:
    """Container ``container_id``'s Tier 1 log (not opened)."""
    if jetstream is not None:
        from segmentstore.tier1.jetstream import JetStreamDurableDataLog

        return JetStreamDurableDataLog(jetstream, container_id)
    directory = container_tier1_dir(data_dir, container_id)
    return LocalDurableDataLog(
        directory, segment_bytes=tier1.segment_bytes, segment_ms=tier1.segment_ms
    )


async def claim_shared_tier1(
    jetstream: JetStreamOptions, containers: int, patience_s: float = _PATIENCE_S
) -> None:
    """Tier 1 is shared: the container count is kept beside the epochs, not on this disk.

    JetStream out of reach (starting too, or electing a leader) is waited for, up to
    ``patience_s``; a count that differs from the recorded one is refused at once."""
    from segmentstore.tier1.jetstream import claim_container_count

    deadline = time.monotonic() + patience_s
    delay = 0.2
    while True:
        try:
            # Bounded: a client that never reaches a server keeps trying to, silently.
            left_s = max(0.1, deadline - time.monotonic())
            try:
                await asyncio.wait_for(claim_container_count(jetstream, containers), left_s)
            except TimeoutError:
                servers = ", ".join(jetstream.servers)
                raise DataLogWriteError(f"no JetStream server answered at {servers}") from None
            return
        except DataLogWriteError as error:
            if time.monotonic() + delay > deadline:
                raise InvalidArgumentError(
                    f"cannot reach JetStream within {patience_s:.0f} s: {error}: check that the"
                    " servers run and that tier1.jetstream.servers (--nats) and the credentials"
                    " name them"
                ) from error
            log.warning("JetStream not reachable yet, trying again in %.1f s: %s", delay, error)
        except DataLogError as error:
            raise InvalidArgumentError(str(error)) from error
        await asyncio.sleep(delay)
        delay = min(delay * 2, 5.0)
