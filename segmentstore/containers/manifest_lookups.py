"""Manifest reads for segments that are not in memory, many callers to a worker-thread hop.

A container looks a segment up in Tier 2 whenever it is asked about a name it does not hold
in memory: to load an evicted segment back, and before creating one (a name whose manifest
exists is taken). Creating many segments means as many lookups, nearly all of them for names
Tier 2 has never seen; handing each to a worker thread of its own costs the event loop more
than the read. So every lookup asked in one turn of the loop goes to one thread together, and
on a backend whose every read is a network round trip (S3), several run at once there.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

from segmentstore.tier2 import ChunkStorage, ManifestStore, SegmentManifest, Tier2Error

_Outcome = SegmentManifest | None | Tier2Error

# Lookups of one batch run at once on a remote backend; a local file system answers faster
# from one thread than threads can be handed the work.
_REMOTE_PARALLELISM = 16


class ManifestLookups:
    def __init__(self, storage: ChunkStorage) -> None:
        self._manifests = ManifestStore(storage)
        self._remote = not storage.uri.startswith("file://")
        self._pending: dict[str, list[asyncio.Future[SegmentManifest | None]]] = {}
        self._batches: set[asyncio.Task[None]] = set()
        self._pool: ThreadPoolExecutor | None = None

    async def get(self, name: str) -> SegmentManifest | None:
        """The manifest of segment ``name``, or None if Tier 2 has none. Raises ``Tier2Error``."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[SegmentManifest | None] = loop.create_future()
        waiting = self._pending.get(name)
        if waiting is not None:
            waiting.append(future)
        else:
            if not self._pending:
                loop.call_soon(self._start_batch)
            self._pending[name] = [future]
        return await future

    def _start_batch(self) -> None:
        batch, self._pending = self._pending, {}
        task = asyncio.get_running_loop().create_task(self._run(batch))
        self._batches.add(task)  # held until done: a task nobody holds may be collected
        task.add_done_callback(self._batches.discard)

    async def _run(self, batch: dict[str, list[asyncio.Future[SegmentManifest | None]]]) -> None:
        try:
            outcomes = await asyncio.to_thread(self._load_all, list(batch))
        except BaseException as error:  # the thread hop itself failed (shutting down)
            for futures in batch.values():
                for future in futures:
                    if not future.done():
                        future.set_exception(error)
            raise
        for name, futures in batch.items():
            outcome = outcomes[name]
            for future in futures:
                if future.done():
                    continue  # its caller was cancelled
                if isinstance(outcome, Tier2Error):
                    future.set_exception(outcome)
                else:
                    future.set_result(outcome)

    def _load_all(self, names: list[str]) -> dict[str, _Outcome]:
        if self._remote and len(names) > 1:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(_REMOTE_PARALLELISM, "manifest-lookup")
            return dict(zip(names, self._pool.map(self._load, names), strict=True))
        return {name: self._load(name) for name in names}

    def _load(self, name: str) -> _Outcome:
        try:
            loaded = self._manifests.load(name)
            if loaded is not None:
                # The segment loaded from it takes appends and leaves Tier 1 behind: it must
                # not be one that an owner killed mid-save left for a power loss to take back.
                self._manifests.make_durable(name)
        except Tier2Error as error:
            return error
        return None if loaded is None else loaded[0]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None
