"""The threads the Storage Writers' Tier 2 calls block in.

Pools of the writers' own (the event loop's default pool is a few threads, shared with
everything else), one per size: the containers of a node share their Tier 2, so they share how
many of its calls at once pay off (``ChunkStorage.concurrent_writes``) too.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


class Tier2Threads:
    def __init__(self, threads: int) -> None:
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="tier2-writer")

    @staticmethod
    def shared(threads: int) -> Tier2Threads:
        found = _SHARED.get(threads)
        if found is None:
            found = _SHARED[threads] = Tier2Threads(threads)
        return found

    async def run(self, call: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(
            self._pool, functools.partial(call, *args)
        )


_SHARED: dict[int, Tier2Threads] = {}
