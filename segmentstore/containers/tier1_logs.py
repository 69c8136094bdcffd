"""Which Tier 1 log a container gets: a local write-ahead log under the data directory, or a
replicated stream on NATS JetStream (``tier1.mode``), and what a shared Tier 1 records once."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import TYPE_CHECKING

from segmentstore.containers.startup_wait import JETSTREAM_HINT, retry_while_starting
from segmentstore.contracts.errors import InvalidArgumentError
from segmentstore.data_dir import container_tier1_dir
from segmentstore.settings import Tier1Settings
from segmentstore.tier1 import DataLogError, DataLogWriteError, DurableDataLog
from segmentstore.tier1.local import LocalDurableDataLog

if TYPE_CHECKING:
    from segmentstore.tier1.jetstream import JetStreamOptions


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
    jetstream: JetStreamOptions, containers: int, patience_s: float
) -> None:
    """Tier 1 is shared: the container count is kept beside the epochs, not on this disk.

    JetStream out of reach (starting too, or electing a leader) is waited for, up to
    ``patience_s``; a count that differs from the recorded one is refused at once."""
    from segmentstore.tier1.jetstream import claim_container_count

    deadline = time.monotonic() + patience_s

    async def claim() -> None:
        # Bounded: a client that never reaches a server keeps trying to, silently.
        left_s = max(0.1, deadline - time.monotonic())
        try:
            await asyncio.wait_for(claim_container_count(jetstream, containers), left_s)
        except TimeoutError:
            servers = ", ".join(jetstream.servers)
            raise DataLogWriteError(f"no JetStream server answered at {servers}") from None
        except DataLogWriteError:
            raise
        except DataLogError as error:
            raise InvalidArgumentError(str(error)) from error

    def gave_up(error: BaseException) -> InvalidArgumentError:
        return InvalidArgumentError(
            f"cannot reach JetStream within {patience_s:g} s: {error}: {JETSTREAM_HINT}"
        )

    await retry_while_starting(
        claim,
        transient=(DataLogWriteError,),
        patience_s=patience_s,
        not_yet="JetStream not reachable yet",
        gave_up=gave_up,
    )
