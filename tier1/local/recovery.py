"""Finding where the valid records of the last log file end, and dropping a torn tail.

Only the last file can have a torn tail: the writer makes a file durable before it creates the
next one. The rule that tells a torn tail from corruption:

* walk the records from the file's start until one is invalid (short header, payload past the
  end of the file, bad magic, wrong address, CRC mismatch);
* if no valid record can be found anywhere after it (the magic at a position where a whole
  header and payload parse, name that position as their address and pass the CRC), the bad
  bytes are a torn write: truncate the file to the end of the last valid record and fsync it;
* if one can, the bad record is either in the middle of the log (corruption: raise
  ``DataLogCorruptionError`` and never guess) or in the part a power loss left half written:
  the page cache writes pages back in any order, so the bytes after the last ``fdatasync`` can
  come back with a later record whole and an earlier one missing. A write that never reached
  the disk reads as zeros, so a bad stretch (up to the next valid record) that is all zeros,
  or holds a whole zeroed 512-byte sector, is torn: it and everything after it were written
  after the last ``fdatasync`` that completed (one completing later would have covered them
  all), so none of it was acknowledged, and the file is truncated there. etcd's write-ahead
  log tells a torn record the same way. The price: a record whose own payload held an aligned
  run of 512 zero bytes and was later corrupted on the disk is taken for torn, and the records
  after it in the last file are dropped.
"""

from __future__ import annotations

import os

from segmentstore.tier1.errors import DataLogCorruptionError
from segmentstore.tier1.local.record import find_record
from segmentstore.tier1.local.scanner import FileScanner, InvalidRecordError


def recover_tail(path: str, base_address: int) -> int:
    """Drop a torn tail of the file at ``path``; return the position where its records end.
    What stays is synced first: a writer killed before its ``fdatasync`` left records that
    recovery replays and builds on, but that a power loss would still take back."""
    size = os.stat(path).st_size
    with FileScanner(path, base_address, size) as scanner:
        try:
            while scanner.next_batch(min_address=None) is not None:
                pass
        except InvalidRecordError as bad:
            end, reason = bad.position, bad.reason
        else:
            _sync(path)
            return size
    with open(path, "rb") as f:
        f.seek(end)
        rest = f.read()
    later = find_record(rest, 1, base_address + end)
    if later is not None and not never_written(rest[:later], end):
        raise DataLogCorruptionError(
            path,
            base_address + end,
            f"{reason}; a valid record follows at address {base_address + end + later}",
        )
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.ftruncate(fd, end)
        os.fsync(fd)
    finally:
        os.close(fd)
    return end


SECTOR_BYTES = 512
_ZERO_SECTOR = bytes(SECTOR_BYTES)


def never_written(stretch: bytes, position: int) -> bool:
    """Whether ``stretch`` (at file ``position``) shows a write that never reached the disk:
    it is all zeros, or one of its sector-aligned 512-byte blocks is."""
    if not stretch.strip(b"\0"):
        return True
    view = memoryview(stretch)
    start = -position % SECTOR_BYTES
    return any(
        view[at : at + SECTOR_BYTES] == _ZERO_SECTOR
        for at in range(start, len(stretch) - SECTOR_BYTES + 1, SECTOR_BYTES)
    )


def _sync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fdatasync(fd)
    finally:
        os.close(fd)
