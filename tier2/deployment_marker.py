"""The marker object that gives a Tier 2 location its identity: ``deployment.json``.

A cluster's nodes must all write to the one Tier 2 their cluster records. Its URI alone
cannot tell: the same bucket may be reached through different endpoints, and two different
directories may be mounted at the same path on two machines. So the first node of a cluster
writes a marker with a random id at the root of its Tier 2, the cluster records that id, and
every node that joins reads the marker in its own Tier 2 and is refused if the id differs or
the marker is missing. It lies beside ``segments/`` and is never a segment's.
"""

from __future__ import annotations

import json
import uuid

from segmentstore.tier2.chunk_storage import ChunkStorage
from segmentstore.tier2.errors import ManifestConflictError

MARKER_KEY = "deployment.json"
_FORMAT = 1


def read_marker(storage: ChunkStorage) -> str | None:
    """The id in ``storage``'s marker; None if it has none (or one this version cannot
    read, which no cluster could have recorded)."""
    found = storage.get(MARKER_KEY)
    if found is None:
        return None
    try:
        document = json.loads(found[0])
        marker_id = document["id"]
    except (ValueError, KeyError, TypeError):
        return None
    return marker_id if isinstance(marker_id, str) else None


def ensure_marker(storage: ChunkStorage) -> str:
    """The id in ``storage``'s marker, written first if there is none (by this call, or by
    another node's at the same moment: both then get the same id)."""
    existing = read_marker(storage)
    if existing is not None:
        return existing
    document = {"format": _FORMAT, "id": uuid.uuid4().hex}
    try:
        storage.put_if(MARKER_KEY, json.dumps(document).encode(), None)
        return str(document["id"])
    except ManifestConflictError:
        written = read_marker(storage)
        if written is None:
            raise
        return written
