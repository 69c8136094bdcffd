"""How the JetStream publisher reads the stream's answers: what may yet be stored is probed
and sent again, never failed; only a full store or a real refusal fails the log. And a late
acknowledgement that comes after a message ran into trouble never kills the publisher.

Found by the soak drill: under load, a retry overtaking its original got "duplicate message
id is in process" (10158) and took the container offline, and a late acknowledgement left
the publisher in trouble without a stall, which it took for a bug and died of.
"""

from __future__ import annotations

import asyncio
import errno
import json
from dataclasses import dataclass, field

import pytest
from nats.aio.client import Client

from segmentstore.tier1.errors import DataLogWriteError
from segmentstore.tier1.jetstream.options import JetStreamOptions
from segmentstore.tier1.jetstream.publisher import Publisher


@dataclass
class Answer:
    """What the publisher's inbox receives from the stream for one message."""

    subject: str
    data: bytes
    headers: dict[str, str] = field(default_factory=dict)


async def probe_nothing(sequence: int) -> str | None:
    from nats.js.errors import NotFoundError

    raise NotFoundError


async def owned() -> None:
    return None


def publisher() -> Publisher:
    """A publisher with one record queued and sent, on a client that is never connected:
    the answers are handed to it directly."""
    options = JetStreamOptions(ack_timeout_ms=100, write_timeout_ms=1_000)
    made = Publisher(
        Client(),
        probe_nothing,
        owned,
        "s.container.0.e1",
        1,
        7,
        1 << 20,
        options,
        lambda size: None,
    )
    return made


async def queued(made: Publisher) -> tuple[asyncio.Future[int], str]:
    future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    made.append(b"record", future)
    head = made._pipeline.messages[0]
    made._pipeline.sent = 1
    return future, f"{made._inbox}.{head.number}"


def error(err_code: int, status: int, description: str) -> bytes:
    return json.dumps(
        {"error": {"code": status, "err_code": err_code, "description": description}}
    ).encode()


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        (error(10158, 409, "duplicate message id is in process"), "a retry overtook its original"),
        (error(10071, 400, "wrong last sequence: 7"), "a broken chain"),
        (error(10164, 400, "wrong last sequence"), "a broken chain, as newer servers say it"),
        (error(10077, 503, "store closed"), "a leader stepping down under the write"),
    ],
)
async def test_an_answer_that_may_yet_be_stored_is_probed_not_failed(
    answer: bytes, why: str
) -> None:
    made = publisher()
    future, inbox = await queued(made)
    await made._on_ack(Answer(inbox, answer))  # type: ignore[arg-type]
    assert made.failure is None, why
    assert not future.done()
    assert made.stalled and made._pipeline.messages[0].trouble


@pytest.mark.parametrize(
    "answer",
    [error(10077, 503, "maximum bytes exceeded"), error(10023, 503, "insufficient resources")],
)
async def test_a_full_store_fails_the_log_as_out_of_space(answer: bytes) -> None:
    made = publisher()
    future, inbox = await queued(made)
    await made._on_ack(Answer(inbox, answer))  # type: ignore[arg-type]
    assert isinstance(made.failure, DataLogWriteError)
    assert made.failure.errno == errno.ENOSPC
    with pytest.raises(DataLogWriteError):
        await future


async def test_a_refusal_fails_the_log() -> None:
    made = publisher()
    future, inbox = await queued(made)
    await made._on_ack(Answer(inbox, error(10054, 400, "message size exceeds maximum allowed")))  # type: ignore[arg-type]
    assert isinstance(made.failure, DataLogWriteError)
    assert "message size exceeds" in str(made.failure)
    with pytest.raises(DataLogWriteError):
        await future


async def test_a_late_acknowledgement_after_trouble_leaves_the_publisher_working() -> None:
    made = publisher()
    future, inbox = await queued(made)
    await made._on_ack(Answer(inbox, error(10158, 409, "duplicate message id is in process")))  # type: ignore[arg-type]
    # The original's acknowledgement comes after all: stored at 8, right after 7.
    await made._on_ack(Answer(inbox, json.dumps({"stream": "s", "seq": 8}).encode()))  # type: ignore[arg-type]
    assert await future == 8
    assert not made.stalled
    # The pump now finds the trouble flag with no stall and recovers from it, without dying.
    await made._recover()
    assert made.failure is None
