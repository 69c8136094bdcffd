"""The record format of a local log file, and how to tell a real record from garbage.

A record is a 20-byte little-endian header followed by its payload::

    offset  size  field
    0       4     magic    MAGIC_BYTES, b"T1LR"
    4       4     length   payload bytes
    8       8     address  the record's absolute address: file base address + position in file
    16      4     crc      CRC-32C over header bytes 0..15, then over the payload

The address in the header is what makes a stray match of the magic inside a payload or in
garbage almost never pass for a record: a candidate must name the exact position it sits at
and carry a matching CRC.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from crc32c import crc32c

from segmentstore.tier1.log import Buffer

HEADER = struct.Struct("<IIQI")
HEADER_SIZE = HEADER.size
MAGIC_BYTES = b"T1LR"
MAGIC = int.from_bytes(MAGIC_BYTES, "little")

# The CRC covers the header up to (not including) the CRC field itself.
_PREFIX = struct.Struct("<IIQ")
_CRC = struct.Struct("<I")
_PREFIX_SIZE = _PREFIX.size

MAX_PAYLOAD = 0xFFFF_FFFF


def encode_header(address: int, length: int, parts: Sequence[Buffer]) -> bytes:
    """The header of a record at ``address`` whose payload is ``parts`` (``length`` bytes)."""
    prefix = _PREFIX.pack(MAGIC, length, address)
    crc = crc32c(prefix)
    for part in parts:
        crc = crc32c(part, crc)
    return prefix + _CRC.pack(crc)


def header_problem(
    magic: int, length: int, address: int, expected_address: int, room: int
) -> str | None:
    """Why a header read at ``expected_address`` is not a record's, or None if it may be.

    ``room`` is how many bytes the file holds from the header's position on.
    """
    if magic != MAGIC:
        return f"bad magic {magic:#010x}"
    if address != expected_address:
        return f"header names address {address}"
    if HEADER_SIZE + length > room:
        return f"payload of {length} bytes runs past the end of the file"
    return None


def crc_matches(buf: Buffer, offset: int, length: int, crc: int) -> bool:
    """Whether the record whose header starts at ``buf[offset]`` carries its payload intact."""
    view = memoryview(buf)
    payload_start = offset + HEADER_SIZE
    actual = crc32c(view[offset : offset + _PREFIX_SIZE])
    actual = crc32c(view[payload_start : payload_start + length], actual)
    return actual == crc


def find_record(buf: bytes, start: int, base_address: int) -> int | None:
    """The position of the first whole valid record in ``buf`` at or after ``start``.

    ``buf`` holds a file from some position to its end, ``buf[0]`` being at ``base_address``.
    Used after an invalid record to decide whether it is a torn tail (nothing valid follows) or
    corruption in the middle of the log (something valid follows).
    """
    position = buf.find(MAGIC_BYTES, start)
    while position != -1:
        room = len(buf) - position
        if room >= HEADER_SIZE:
            magic, length, address, crc = HEADER.unpack_from(buf, position)
            problem = header_problem(magic, length, address, base_address + position, room)
            if problem is None and crc_matches(buf, position, length, crc):
                return position
        position = buf.find(MAGIC_BYTES, position + 1)
    return None
