"""The cluster's secret at work between nodes: who may act as a member.

Every node holds the same secret (``cluster.secret_file``). From it come two keys
(:class:`~segmentstore.tier1.signing.Signer`): one signs the entries of the lease bucket
(:mod:`segmentstore.tier1.jetstream.lease_entries`), the other the requests one node forwards
to another and the answers the owner gives them:

* a forwarded request carries ``Segment-Forwarded-By: <node>`` and
  ``Segment-Forwarded-Signature: <ms>.<nonce>.<body digest>.<signature>`` over the node,
  method, path, query, time, nonce and the SHA-256 of its body. An owner honours
  ``Segment-Forwarded-By`` only with a signature that checks, made at most
  :data:`MAX_AGE_MS` ago by its own clock and not in the future beyond
  :data:`FUTURE_ALLOWANCE_MS`, whose nonce it has not seen before (:mod:`.nonces`); and it
  hashes the body as it arrives, refusing it before it is applied if it is not the one
  signed. A captured request can neither be sent again nor carry another body;
* the owner's answer carries ``Segment-Owner-Signature`` over its node id, the nonce and the
  status, and the forwarding node passes an answer on only if it checks: a process that
  took over a member's address but lacks the secret can never acknowledge a write.

The nodes' clocks must therefore agree within :data:`FUTURE_ALLOWANCE_MS` (NTP keeps them
within milliseconds). Keeping what travels between nodes secret is TLS's work on a shared
network; the signatures keep it from being forged, replayed or altered.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass

from segmentstore.cluster.nonces import NonceLedger
from segmentstore.tier1.signing import Signer

FORWARDED_BY = b"segment-forwarded-by"
FORWARDED_SIGNATURE = b"segment-forwarded-signature"
OWNER_SIGNATURE = b"segment-owner-signature"
MAX_AGE_MS = 60_000  # a forwarded request is signed as it leaves: older is a replay
FUTURE_ALLOWANCE_MS = 5_000  # how far ahead of the owner's clock a signer's may be


@dataclass(frozen=True, slots=True)
class ForwardedRequest:
    """What a member's valid signature vouches for: its ``nonce`` (the owner's answer names
    it) and the SHA-256 its body must have (``body_sha256``, hexadecimal)."""

    nonce: str
    body_sha256: str


def body_digest(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


class ClusterSecret:
    def __init__(self, secret: bytes) -> None:
        self.leases = Signer(secret, "lease entries")
        self._requests = Signer(secret, "forwarded requests")
        self._nonces = NonceLedger(MAX_AGE_MS + FUTURE_ALLOWANCE_MS)

    def sign_request(
        self,
        node: str,
        method: str,
        path: bytes,
        query: bytes,
        body: bytes = b"",
        at_ms: int | None = None,
    ) -> tuple[str, str]:
        """(the ``Segment-Forwarded-Signature`` value, its nonce) for a request that
        ``node`` forwards with ``body``, signed now (or, for tests, at ``at_ms``)."""
        at = str(int(time.time() * 1000) if at_ms is None else at_ms)
        nonce = secrets.token_hex(12)
        digest = body_digest(body)
        signature = self._requests.sign(_request(node, method, path, query, at, nonce, digest))
        return f"{at}.{nonce}.{digest}.{signature}", nonce

    def check_request(
        self, node: str, method: str, path: bytes, query: bytes, value: bytes | None
    ) -> ForwardedRequest | None:
        """What a member's forwarded request carries, or None if ``value`` (the
        ``Segment-Forwarded-Signature`` header) does not prove that ``node`` is one: a
        signature that does not check, one too old or from the future, or a nonce seen
        before. The body is the caller's to check against ``body_sha256``."""
        if value is None:
            return None
        try:
            at, nonce, digest, signature = value.decode("ascii").split(".")
            made_ms = int(at)
        except ValueError:
            return None
        now_ms = time.time() * 1000
        if not now_ms - MAX_AGE_MS <= made_ms <= now_ms + FUTURE_ALLOWANCE_MS:
            return None
        message = _request(node, method, path, query, at, nonce, digest)
        if not self._requests.verify(message, signature):
            return None
        # Only once it is known to be a member's: a stranger cannot burn a member's nonces.
        if not self._nonces.first_use(nonce, now_ms):
            return None
        return ForwardedRequest(nonce, digest)

    def sign_answer(self, owner: str, nonce: str, status: int) -> str:
        return self._requests.sign(_answer(owner, nonce, status))

    def check_answer(self, owner: str, nonce: str, status: int, value: str | None) -> bool:
        return self._requests.verify(_answer(owner, nonce, status), value)


def _request(
    node: str, method: str, path: bytes, query: bytes, at: str, nonce: str, digest: str
) -> bytes:
    return b"\n".join(
        [
            b"request", node.encode(), method.encode(), path, query, at.encode(),
            nonce.encode(), digest.encode(),
        ]
    )  # fmt: skip


def _answer(owner: str, nonce: str, status: int) -> bytes:
    return b"\n".join([b"answer", owner.encode(), nonce.encode(), str(status).encode()])
