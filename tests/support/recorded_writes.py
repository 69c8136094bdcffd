"""Records sent through an EventWriter while something goes wrong, and the check afterwards
that each segment holds exactly them: every one once, in the order written, at the offset
its acknowledgement gave."""

from __future__ import annotations

import asyncio

from segmentstore.client import AsyncSegmentStoreClient, EventAck, EventReader, EventWriter


class RecordedWrites:
    """Sends numbered records to ``segments`` in turn until :meth:`stop`; remembers each
    record and its acknowledgement."""

    def __init__(self, writer: EventWriter, segments: list[str], pause_every: int = 10) -> None:
        self.writer = writer
        self.segments = segments
        self.written: dict[str, list[bytes]] = {s: [] for s in segments}
        self.acks: dict[str, list[EventAck]] = {s: [] for s in segments}
        self._pause_every = pause_every
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._produce())

    async def stop(self) -> None:
        """Stops sending and waits until every record sent has its answer."""
        self._stop.set()
        assert self._task is not None
        await self._task
        await self.writer.flush()

    @property
    def count(self) -> int:
        return sum(map(len, self.written.values()))

    async def _produce(self) -> None:
        number = 0
        while not self._stop.is_set():
            for segment in self.segments:
                record = b"%s-%06d" % (segment.encode(), number)
                self.acks[segment].append(await self.writer.send(segment, record))
                self.written[segment].append(record)
            number += 1
            if number % self._pause_every == 0:
                await asyncio.sleep(0.001)  # batches go out while records still come

    async def verify(self, client: AsyncSegmentStoreClient) -> None:
        """Every record acknowledged, and each segment exactly the records written to it."""
        for segment in self.segments:
            offsets = [await ack for ack in self.acks[segment]]
            stored = [i async for i in EventReader(client, segment, wait_ms=0, follow=False)]
            assert [payload for _, payload in stored] == self.written[segment], segment
            assert [offset for offset, _ in stored] == offsets, segment
