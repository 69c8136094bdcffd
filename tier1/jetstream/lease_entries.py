"""The signed entries of a cluster's lease bucket.

Each value is a JSON object whose ``sig`` signs the bucket, the key and every other field
(:class:`~segmentstore.tier1.signing.Signer`), and whose ``at`` is when its writer made it
(milliseconds since the epoch). A reader accepts an entry only if the signature is the
cluster's and the entry was stored within :data:`MAX_STORE_DELAY_MS` plus a lease of being
made: a process that can write to the bucket but holds no secret can neither make an entry
nor keep a member's old one alive by writing it again later.

Values per key:

* ``node.<id>``: ``{"url"}`` while the node is alive, ``{"left": true}`` once it left;
* ``container.<n>``: ``{"owner", "epoch"}`` while held, ``{"owner", "released": true}`` once
  its holder gave it up on purpose (the next owner need not wait for it to expire).
"""

from __future__ import annotations

import json
import time
from datetime import datetime
from typing import Any

from segmentstore.tier1.signing import Signer

# How much later than its ``at`` an entry may be stored (clocks of the writer and the
# stream's leader apart, a slow write), on top of the lease itself.
MAX_STORE_DELAY_MS = 10_000


def encode(signer: Signer, bucket: str, key: str, fields: dict[str, Any]) -> bytes:
    """The value of ``key``: ``fields`` with ``at`` (now) and the signature."""
    body = {**fields, "at": int(time.time() * 1000)}
    body["sig"] = signer.sign(_signed_part(bucket, key, body))
    return json.dumps(body, separators=(",", ":")).encode()


def decode(
    signer: Signer,
    bucket: str,
    key: str,
    value: bytes | None,
    stored: datetime | None,
    lease_ms: int,
) -> dict[str, Any] | None:
    """The fields of a member's entry, or None if it is not one: unsigned, signed with
    another secret, malformed, or stored long after it was made (``stored``: the stream's
    timestamp; None when not known, as for a direct get)."""
    try:
        body = json.loads(value or b"")
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(body, dict) or not isinstance(body.get("at"), int):
        return None
    signature = body.pop("sig", None)
    if not isinstance(signature, str) or not signer.verify(
        _signed_part(bucket, key, body), signature
    ):
        return None
    if stored is not None:
        delay_ms = stored.timestamp() * 1000 - body["at"]
        if abs(delay_ms) > lease_ms + MAX_STORE_DELAY_MS:
            return None
    return body


def _signed_part(bucket: str, key: str, body: dict[str, Any]) -> bytes:
    fields = {k: v for k, v in body.items() if k != "sig"}
    return b"\n".join([bucket.encode(), key.encode(), json.dumps(fields, sort_keys=True).encode()])
