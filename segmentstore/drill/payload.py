"""Drill payloads that can be verified from their own bytes.

Each append is one record: a 24-byte header (magic ``DRL1``, writer number, writer sequence,
body length, CRC-32 of the body) and a body derived from the writer and sequence alone. A
segment written only by the drill is a plain run of records, so reading it back tells, with no
other memory, where every record starts, whose it is, and whether any byte is wrong or torn.
"""

from __future__ import annotations

import random
import struct
import zlib
from dataclasses import dataclass

MAGIC = b"DRL1"
_HEADER = struct.Struct(">4sIQII")
HEADER_BYTES = _HEADER.size


def body(writer: int, seq: int, length: int) -> bytes:
    return random.Random((writer << 40) ^ seq).randbytes(length)


def record(writer: int, seq: int, length: int) -> bytes:
    """The bytes of one append: header and a ``length``-byte body."""
    data = body(writer, seq, length)
    return _HEADER.pack(MAGIC, writer, seq, length, zlib.crc32(data)) + data


@dataclass(frozen=True, slots=True)
class Record:
    offset: int
    writer: int
    seq: int
    size: int  # header and body


@dataclass(frozen=True, slots=True)
class Parsed:
    records: list[Record]
    end: int  # the offset just past the last whole record
    torn_at: int | None  # where bytes stopped being whole records, if they did
    reason: str = ""


def parse(data: bytes | memoryview, base: int = 0, final: bool = True) -> Parsed:
    """The records of ``data`` (which starts at segment offset ``base``). Bad bytes end the
    parse at ``torn_at``; with ``final=False`` an incomplete last record is not torn (a tail
    reader has just not seen its end yet)."""
    view = memoryview(data)
    records: list[Record] = []
    at = 0
    while at < len(view):
        if len(view) - at < HEADER_BYTES:
            break
        magic, writer, seq, length, crc = _HEADER.unpack_from(view, at)
        if magic != MAGIC:
            return Parsed(records, base + at, base + at, "no record header")
        end = at + HEADER_BYTES + length
        if end > len(view):
            break
        content = view[at + HEADER_BYTES : end]
        if zlib.crc32(content) != crc or content != body(writer, seq, length):
            return Parsed(records, base + at, base + at, f"record {writer}/{seq} is corrupt")
        records.append(Record(base + at, writer, seq, end - at))
        at = end
    if at < len(view) and final:
        return Parsed(records, base + at, base + at, "a record is cut short")
    return Parsed(records, base + at, None)
