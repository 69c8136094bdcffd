"""The cluster's secret at work between nodes: who may act as a member.

Every node holds the same secret (``cluster.secret_file``). From it come two keys
(:class:`~segmentstore.tier1.signing.Signer`): one signs the entries of the lease bucket
(:mod:`segmentstore.tier1.jetstream.lease_entries`), the other the requests one node forwards
to another and the answers the owner gives them:

* a forwarded request carries ``Segment-Forwarded-By: <node>`` and
  ``Segment-Forwarded-Signature: <ms>.<nonce>.<signature>`` over the node, method, path,
  query, time and nonce; an owner honours ``Segment-Forwarded-By`` only with a signature that
  checks and a time within :data:`MAX_CLOCK_SKEW_MS` of its own clock;
* the owner's answer carries ``Segment-Owner-Signature`` over its node id, the nonce and the
  status, and the forwarding node passes an answer on only if it checks: a process that
  took over a member's address but lacks the secret can never acknowledge a write.

The signatures prove membership, not the integrity of a body: that is TLS's work between
nodes on a shared network.
"""

from __future__ import annotations

import secrets
import time

from segmentstore.tier1.signing import Signer

FORWARDED_BY = b"segment-forwarded-by"
FORWARDED_SIGNATURE = b"segment-forwarded-signature"
OWNER_SIGNATURE = b"segment-owner-signature"
MAX_CLOCK_SKEW_MS = 300_000


class ClusterSecret:
    def __init__(self, secret: bytes) -> None:
        self.leases = Signer(secret, "lease entries")
        self._requests = Signer(secret, "forwarded requests")

    def sign_request(self, node: str, method: str, path: bytes, query: bytes) -> tuple[str, str]:
        """(the ``Segment-Forwarded-Signature`` value, its nonce) for a request that
        ``node`` forwards."""
        at = str(int(time.time() * 1000))
        nonce = secrets.token_hex(8)
        signature = self._requests.sign(_request(node, method, path, query, at, nonce))
        return f"{at}.{nonce}.{signature}", nonce

    def check_request(
        self, node: str, method: str, path: bytes, query: bytes, value: bytes | None
    ) -> str | None:
        """The nonce of a member's forwarded request, or None if ``value`` (the
        ``Segment-Forwarded-Signature`` header) does not prove that ``node`` is one."""
        if value is None:
            return None
        try:
            at, nonce, signature = value.decode("ascii").split(".")
            made_ms = int(at)
        except ValueError:
            return None
        if abs(time.time() * 1000 - made_ms) > MAX_CLOCK_SKEW_MS:
            return None
        if not self._requests.verify(_request(node, method, path, query, at, nonce), signature):
            return None
        return nonce

    def sign_answer(self, owner: str, nonce: str, status: int) -> str:
        return self._requests.sign(_answer(owner, nonce, status))

    def check_answer(self, owner: str, nonce: str, status: int, value: str | None) -> bool:
        return self._requests.verify(_answer(owner, nonce, status), value)


def _request(node: str, method: str, path: bytes, query: bytes, at: str, nonce: str) -> bytes:
    return b"\n".join(
        [b"request", node.encode(), method.encode(), path, query, at.encode(), nonce.encode()]
    )


def _answer(owner: str, nonce: str, status: int) -> bytes:
    return b"\n".join([b"answer", owner.encode(), nonce.encode(), str(status).encode()])
