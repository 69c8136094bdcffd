"""Walking the records of one log file from its start, a large piece at a time.

Both recovery (find where valid records end) and :meth:`LocalDurableDataLog.read` use it. It
runs in a worker thread; each :meth:`FileScanner.next_batch` call reads and checks about
``chunk_bytes`` so that one thread hop carries many records.
"""

from __future__ import annotations

import io

from segmentstore.tier1.local.record import HEADER, HEADER_SIZE, crc_matches, header_problem
from segmentstore.tier1.log import LogRecord

CHUNK_BYTES = 8 * 1024 * 1024


class InvalidRecordError(Exception):
    """The bytes at ``position`` (in the file) are not a valid record."""

    def __init__(self, position: int, reason: str) -> None:
        super().__init__(f"invalid record at file position {position}: {reason}")
        self.position = position
        self.reason = reason


class FileScanner:
    """Checks and yields the records in the first ``limit`` bytes of one file.

    Every record in that range must be valid: the first one that is not raises
    :class:`InvalidRecordError` and leaves :attr:`position` at its start, i.e. at the end of the
    valid records.
    """

    def __init__(
        self, path: str, base_address: int, limit: int, chunk_bytes: int = CHUNK_BYTES
    ) -> None:
        self.path = path
        self.position = 0
        self._base_address = base_address
        self._limit = limit
        self._chunk_bytes = chunk_bytes
        self._file: io.FileIO | None = None
        # The unconsumed bytes read so far: _buf[_offset] is the byte at file position
        # self.position.
        self._buf = b""
        self._offset = 0

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> FileScanner:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def next_batch(self, min_address: int | None) -> list[LogRecord] | None:
        """Check about ``chunk_bytes`` of records; None once ``limit`` is reached.

        Returns the records at or above ``min_address``; with None, checks without copying
        payloads out (recovery only needs to know where valid records end).
        """
        if self.position >= self._limit:
            return None
        records: list[LogRecord] = []
        checked = 0
        while self.position < self._limit and checked < self._chunk_bytes:
            room = self._limit - self.position
            if room < HEADER_SIZE:
                raise InvalidRecordError(self.position, f"short header ({room} bytes)")
            self._fill(HEADER_SIZE)
            magic, length, address, crc = HEADER.unpack_from(self._buf, self._offset)
            problem = header_problem(
                magic, length, address, self._base_address + self.position, room
            )
            if problem is not None:
                raise InvalidRecordError(self.position, problem)
            size = HEADER_SIZE + length
            self._fill(size)
            if not crc_matches(self._buf, self._offset, length, crc):
                raise InvalidRecordError(self.position, "CRC mismatch")
            if min_address is not None and address >= min_address:
                start = self._offset + HEADER_SIZE
                records.append(LogRecord(address, self._buf[start : start + length]))
            self._offset += size
            self.position += size
            checked += size
        return records

    def _fill(self, needed: int) -> None:
        """Make ``_buf[_offset:]`` hold at least ``needed`` bytes (``needed`` <= room)."""
        available = len(self._buf) - self._offset
        if available >= needed:
            return
        if self._file is None:
            self._file = io.FileIO(self.path, "r")
        read_from = self.position + available
        # Read a whole chunk when we must read at all, but never past the limit: the bytes
        # beyond it belong to no one (a torn tail, or a concurrent writer).
        want = min(max(needed - available, self._chunk_bytes), self._limit - read_from)
        self._file.seek(read_from)
        pieces = [self._buf[self._offset :]]
        got = 0
        while got < want:
            piece = self._file.read(want - got)
            if not piece:
                break
            pieces.append(piece)
            got += len(piece)
        self._buf = b"".join(pieces)
        self._offset = 0
        if len(self._buf) < needed:
            raise InvalidRecordError(
                self.position, f"file ends at position {read_from + got}, before its known end"
            )
