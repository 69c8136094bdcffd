"""Checks on what a test leaves in its event loop."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any


@asynccontextmanager
async def every_exception_retrieved() -> AsyncIterator[None]:
    """Fail if an exception was left that nobody retrieved ("Future exception was never
    retrieved"): the loop reports those to its handler, not as warnings, so failure paths must
    consume the futures they fail."""
    loop = asyncio.get_running_loop()
    unretrieved: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _, context: unretrieved.append(context))
    yield
    gc.collect()  # futures that died in reference cycles report now
    loop.set_exception_handler(previous)
    assert not unretrieved, [context.get("message") for context in unretrieved]
