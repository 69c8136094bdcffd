"""Finding where the valid records of the last log file end, and dropping a torn tail.

Only the last file can have a torn tail: the writer makes a file durable before it creates the
next one. The rule that tells a torn tail from corruption:

* walk the records from the file's start until one is invalid (short header, payload past the
  end of the file, bad magic, wrong address, CRC mismatch);
* if a valid record can be found anywhere after it (the magic at a position where a whole
  header and payload parse, name that position as their address and pass the CRC), the bad
  record is in the middle of the log: raise ``DataLogCorruptionError`` and never guess;
* otherwise the bad bytes are a torn write: truncate the file to the end of the last valid
  record and fsync it.
"""

from __future__ import annotations

import os

from segmentstore.tier1.errors import DataLogCorruptionError
from segmentstore.tier1.local.record import find_record
from segmentstore.tier1.local.scanner import FileScanner, InvalidRecordError


def recover_tail(path: str, base_address: int) -> int:
    """Drop a torn tail of the file at ``path``; return the position where its records end."""
    size = os.stat(path).st_size
    with FileScanner(path, base_address, size) as scanner:
        try:
            while scanner.next_batch(min_address=None) is not None:
                pass
        except InvalidRecordError as bad:
            end, reason = bad.position, bad.reason
        else:
            return size
    with open(path, "rb") as f:
        f.seek(end)
        rest = f.read()
    later = find_record(rest, 1, base_address + end)
    if later is not None:
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
