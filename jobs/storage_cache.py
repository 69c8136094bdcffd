"""One chunk storage per Tier 2 location and process.

Spark reuses its Python workers across tasks; opening an S3 client for every partition would
cost more than reading a small one. The storages stay open for the life of the process. A
location that does not exist is an error (:func:`segmentstore.jobs.selection.open_read_storage`).
"""

from __future__ import annotations

import threading

from segmentstore.jobs.selection import open_read_storage
from segmentstore.tier2 import ChunkStorage

_lock = threading.Lock()
_open: dict[tuple[str, tuple[tuple[str, str], ...]], ChunkStorage] = {}


def open_storage(uri: str, options: dict[str, str]) -> ChunkStorage:
    key = (uri, tuple(sorted(options.items())))
    with _lock:
        storage = _open.get(key)
        if storage is None:
            storage = _open[key] = open_read_storage(uri, options)
        return storage
