"""Reading every drill segment back and checking it against the ledger, and the exactly-once
check: every writer's last append, sent again, must be answered ``duplicate``."""

from __future__ import annotations

import asyncio
import copy
import json
import os
import random
import time
from collections.abc import Mapping

import httpx

from segmentstore.drill.ledger import Verdict, check
from segmentstore.drill.load import Load, answered, segment_path
from segmentstore.drill.payload import parse, record

# A piece each read: small enough to be answered well within a client's timeout even when a
# loaded owner forwards it from Tier 2.
_READ_BYTES = 4 << 20
_VERIFIERS = 32  # segments read back (or retried) at once


class VerifyError(RuntimeError):
    """The store did not answer well enough, within the deadline, to verify anything."""

    def __init__(self, message: str, reason: str = "no answer") -> None:
        super().__init__(message)
        self.reason = reason  # short, to count losses by: the error code, or "no answer"


async def _get(
    client: httpx.AsyncClient, path: str, patience_s: float, **params: int | str
) -> bytes | None:
    """The answer's body, asked again until ``patience_s`` has passed; None if the segment
    does not exist (any more)."""
    deadline = time.monotonic() + patience_s
    while True:
        try:
            answer = await client.get(path, params=params)
            if answer.status_code == 200:
                return answer.content
            if answer.status_code == 404 and "segment_not_found" in answer.text:
                return None
            why = f"{answer.status_code} {answer.text[:200]}"
            reason = f"{answer.status_code} {_error_code(answer)}"
        except httpx.TransportError as error:
            why, reason = repr(error), "no answer"
        if time.monotonic() > deadline:
            raise VerifyError(f"GET {path}: {why}", reason)
        await asyncio.sleep(0.1)


async def verify_all(
    load: Load,
    client: httpx.AsyncClient,
    timeout_s: float,
    since: Mapping[str, int] | None = None,
    most: int | None = None,
) -> Verdict:
    """Every segment read back and checked against its ledger: whole, or with ``since`` (how
    far each segment was read back and checked before) only from there on; with ``most``, at
    most that many segments, drawn from those with something to check.

    Each read may be answered late or refused for up to ``timeout_s`` (it is asked again
    meanwhile): the whole takes as long as what was written takes to read, which after an
    hour under load is minutes, not the patience owed to one answer. Once a segment could not
    be read, each of the rest gets one try: a store that is down would otherwise cost
    ``timeout_s`` per segment.

    Every acknowledged append that cannot be read back is lost, whatever the reason (an
    offline container, a short chunk, a damaged manifest): the verdict counts it under that
    reason (``unreadable: 503 container_unavailable``) beside those missing from what was read.
    """
    verdict = Verdict()
    unreadable: list[str] = []
    # A segment with nothing acknowledged since it was last checked (or ever) needs no read:
    # with many segments, most are untouched between two faults. That every segment created
    # still exists, the final check asks of the listing, a thousand names a request.
    touched = [
        name
        for name, live in load.ledgers.items()
        if any(offset >= (since or {}).get(name, 0) for offset, _ in live.acknowledged.values())
    ]
    if most is not None and len(touched) > most:
        # Over many segments, reading every one touched since the last check would take the
        # drill's time from its faults: a sample now, the rest at the final check.
        touched = random.Random(len(touched)).sample(touched, most)
    names = iter(touched)
    if since is None:
        try:
            missing = await _not_listed(load, client, timeout_s)
        except VerifyError as error:
            missing = []
            verdict.problems.append(f"could not verify that every segment still exists: {error}")
        for name in missing:
            verdict.count_lost("created, then missing from the listing", 1)
            if len(verdict.problems) < 10:
                verdict.problems.append(f"segment {name} was created and is no longer listed")

    async def verifier() -> None:
        for name in names:
            await _verify_one(name, load, client, timeout_s, since, unreadable, verdict)

    await asyncio.gather(*(verifier() for _ in range(_VERIFIERS)))
    verdict.problems.extend(f"could not verify {why}" for why in unreadable[:10])
    return verdict


async def _not_listed(load: Load, client: httpx.AsyncClient, patience_s: float) -> list[str]:
    """The drill's segments that ``GET /v1/segments`` does not name (all of them were created,
    and none is ever deleted)."""
    # Names share a character prefix (drill/segment-), not a path: commonpath would not do.
    prefix = os.path.commonprefix(list(load.ledgers))  # noqa: RUF071
    listed: set[str] = set()
    after: str | None = None
    while True:
        params = {"prefix": prefix, "limit": "1000"} | ({} if after is None else {"after": after})
        body = await _get(client, "/v1/segments", patience_s, **params)
        page = json.loads(body or b"{}")
        listed.update(page.get("segments", []))
        after = page.get("next")
        if after is None:
            return sorted(set(load.ledgers) - listed)


def _error_code(answer: httpx.Response) -> str:
    try:
        return str(answer.json()["error"]["code"])
    except (ValueError, KeyError, TypeError):
        return "no error code"


async def _verify_one(
    name: str,
    load: Load,
    client: httpx.AsyncClient,
    timeout_s: float,
    since: Mapping[str, int] | None,
    unreadable: list[str],
    verdict: Verdict,
) -> None:
    ledger = copy.deepcopy(load.ledgers[name])  # before the read: all of it was acknowledged
    start = (since or {}).get(name, 0)
    try:
        start, data, failure = await _read_from(
            client, name, start, 0.0 if unreadable else timeout_s
        )
    except VerifyError as error:  # not even its length
        unread = sum(1 for offset, _ in ledger.acknowledged.values() if offset >= start)
        unreadable.append(f"{name} ({unread} acknowledged from {start}): {error}")
        verdict.count_lost(f"unreadable: {error.reason}", unread)
        return
    if failure is None:
        verdict.add(check(name, ledger, parse(data, base=start), start + len(data), start))
        return
    # What was read is checked; the acknowledged records past it are lost, and why.
    parsed = parse(data, base=start, final=False)
    end = parsed.end if parsed.torn_at is None else parsed.torn_at
    unreadable.append(f"{name} from {end}: {failure}")
    reason = f"unreadable: {failure.reason}"
    verdict.add(check(name, ledger, parsed, end, start, reason))


async def _read_from(
    client: httpx.AsyncClient, name: str, start: int, patience_s: float
) -> tuple[int, bytes, VerifyError | None]:
    """(where the read began, the segment's bytes from there, why they end before its end if
    they do): from ``start``, or from 0 if the segment is now shorter than that (what was
    checked is gone: it is checked again, and found lost); no bytes if it does not exist (a
    lost segment loses every append). ``VerifyError`` if not even its length can be read."""
    info = await _get(client, segment_path(name), patience_s)
    if info is None:
        return 0, b"", None
    length = int(json.loads(info)["length"])
    if length < start:
        start = 0
    data = bytearray()
    while start + len(data) < length:
        try:
            piece = await _get(
                client,
                segment_path(name) + ":read",
                patience_s,
                offset=start + len(data),
                max_length=min(_READ_BYTES, length - start - len(data)),
            )
        except VerifyError as failure:
            return start, bytes(data), failure
        if piece is None:
            return 0, b"", None
        data += piece
    return start, bytes(data[: length - start]), None


async def exactly_once_failures(load: Load, client: httpx.AsyncClient) -> list[str]:
    """Send every writer's last resolved append of every segment again: each must be answered
    ``duplicate`` and append nothing (most segments left the node's memory long before, and
    are loaded back to answer)."""
    failures: list[str] = []
    retries = iter(
        (name, writer, seq)
        for name, ledger in load.ledgers.items()
        for writer, seq in ledger.last_seq.items()
    )

    async def retrier() -> None:
        for name, writer, seq in retries:
            data = record(writer, seq, 16)  # the body does not matter: it must not land
            headers = {"Writer-Id": f"drill-w{writer}", "Writer-Seq": str(seq)}
            # Sent until it is not refused (503 while its container moves, in a cluster).
            answer = await answered(
                client, "POST", segment_path(name) + ":append", content=data, headers=headers
            )
            if answer.status_code != 200 or not answer.json().get("duplicate"):
                failures.append(f"{name}: retry of {writer}/{seq} got {answer.text[:200]}")

    await asyncio.gather(*(retrier() for _ in range(_VERIFIERS)))
    return failures
