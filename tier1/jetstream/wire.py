"""How records travel as JetStream messages, and how messages are read back as records.

A record is one message, or, when it is larger than the servers' ``max_payload`` allows, several
consecutive messages whose ``Segmentstore-Part`` header says ``i/n``. A record's address is the
stream sequence of its first message. Every message carries the writer's epoch. At
:meth:`open` a new owner writes one *fence* message (``Segmentstore-Kind: fence``): it is what
makes every later publish of a previous owner fail its expected-last-sequence check, and
readers skip it.

A multi-part record whose parts do not all follow one another (its writer died between them)
was never acknowledged: readers drop it.
"""

from __future__ import annotations

from dataclasses import dataclass

EXPECTED_LAST_SEQUENCE = "Nats-Expected-Last-Sequence"
MESSAGE_ID = "Nats-Msg-Id"
EPOCH = "Segmentstore-Epoch"
PART = "Segmentstore-Part"
KIND = "Segmentstore-Kind"
FENCE = "fence"
# Room left in each message for the headers above.
HEADER_ALLOWANCE = 512


@dataclass(frozen=True, slots=True)
class StoredMessage:
    sequence: int
    headers: dict[str, str]
    data: bytes


def split(record: bytes, max_part_bytes: int) -> list[bytes]:
    """``record`` in parts of at most ``max_part_bytes`` (one part, empty or not, at least)."""
    if len(record) <= max_part_bytes:
        return [record]
    view = memoryview(record)
    return [bytes(view[i : i + max_part_bytes]) for i in range(0, len(record), max_part_bytes)]


def part_header(index: int, count: int) -> dict[str, str]:
    return {PART: f"{index + 1}/{count}"} if count > 1 else {}


class RecordAssembler:
    """Turns stored messages, fed in stream order, into whole records."""

    def __init__(self) -> None:
        self._pending: list[StoredMessage] = []
        self._count = 0

    def feed(self, message: StoredMessage) -> tuple[int, bytes] | None:
        """The ``(address, data)`` of the record ``message`` completes, if it completes one."""
        if message.headers.get(KIND) == FENCE:
            self._pending = []
            return None
        part = message.headers.get(PART)
        if part is None:
            self._pending = []
            return message.sequence, message.data
        index, count = (int(x) for x in part.split("/"))
        if index == 1:
            self._pending, self._count = [message], count
        elif self._pending and index == len(self._pending) + 1 and count == self._count:
            self._pending.append(message)
        else:
            self._pending = []  # a torn record: its first parts were never all written
            return None
        if len(self._pending) < self._count:
            return None
        whole = self._pending
        self._pending = []
        return whole[0].sequence, b"".join(m.data for m in whole)
