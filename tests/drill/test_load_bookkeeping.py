"""The drill's writers remember as resolved only what the store answered: an append still being
retried when the drill stops is in flight, and its sequence is not one whose retry must be
answered ``duplicate`` (it may never have landed)."""

from __future__ import annotations

import asyncio

import httpx

from segmentstore.drill.load import Load


def _store(refusing: bool) -> httpx.MockTransport:
    """A store front that takes every append at the end of its segment, or refuses all
    (``503``, as a container that is moving)."""
    lengths: dict[str, int] = {}

    async def answer(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(0.001)  # as a server would, lets the drill's loop run
        if refusing:
            return httpx.Response(503, json={"error": "container_unavailable"})
        offset = lengths.get(request.url.path, 0)
        lengths[request.url.path] = offset + len(request.content)
        return httpx.Response(200, json={"offset": offset, "length": offset + 1})

    return httpx.MockTransport(answer)


async def _run(refusing: bool) -> Load:
    async with httpx.AsyncClient(base_url="http://store", transport=_store(refusing)) as client:
        load = Load(client, ["s"], writers=2, readers=0, payload_bytes=(10, 20), seed=1)
        load.start()
        await asyncio.sleep(0.3)
        await load.stop()
        return load


async def test_a_writer_stopped_while_retrying_leaves_its_append_in_flight() -> None:
    load = await _run(refusing=True)
    ledger = load.ledgers["s"]
    assert load.stats.retries > 0 and not ledger.acknowledged
    assert ledger.last_seq == {} and ledger.in_flight == {(0, 1), (1, 1)}


async def test_an_answered_append_is_the_writers_last_resolved_one() -> None:
    load = await _run(refusing=False)
    ledger = load.ledgers["s"]
    for writer in (0, 1):
        last = ledger.last_seq[writer]
        assert (writer, last) in ledger.acknowledged and (writer, last + 1) not in ledger.in_flight
    assert set(load.answered_by["s"]) == set(ledger.acknowledged)
