"""Waiting, while a node starts, for a shared service that does not answer yet.

A node of a cluster needs JetStream (its Tier 1 and the leases) and the shared Tier 2 before it
can serve. Nodes and their services are started in any order (a chart starts them together),
so each step is tried again, the wait doubling from 0.2 s to 5 s, for up to
``store.startup_wait_ms``; only then does the node give up and exit, saying what it waited for.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)

# What to look at when JetStream does not answer a starting node.
JETSTREAM_HINT = (
    "check that the JetStream servers run and that tier1.jetstream.servers (--nats) and the"
    " credentials name them"
)
_FIRST_DELAY_S = 0.2
_MAX_DELAY_S = 5.0


async def retry_while_starting(
    step: Callable[[], Awaitable[None]],
    *,
    transient: tuple[type[BaseException], ...],
    patience_s: float,
    not_yet: str,
    gave_up: Callable[[BaseException], BaseException],
) -> None:
    """``step()``, tried again on a ``transient`` error until ``patience_s`` has passed; then
    ``gave_up(the last error)`` is raised. Any other error ends the wait at once. Each retry
    is logged as ``not_yet`` (what an operator greps for, e.g. "cannot join the cluster yet")."""
    deadline = time.monotonic() + patience_s
    delay = _FIRST_DELAY_S
    while True:
        try:
            await step()
            return
        except transient as error:
            if time.monotonic() + delay > deadline:
                raise gave_up(error) from error
            log.warning("%s, trying again in %.1f s: %s", not_yet, delay, error)
        await asyncio.sleep(delay)
        delay = min(delay * 2, _MAX_DELAY_S)
