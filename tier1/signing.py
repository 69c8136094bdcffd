"""Signatures that only holders of a shared secret can make (HMAC-SHA256).

A cluster's nodes share one secret. Whatever one node tells the others through a medium that
others may write to as well (a lease bucket in JetStream, a forwarded HTTP request) carries a
signature, and an entry or request without a valid one is not acted on. Each use derives its
own key from the secret (``purpose``), so that a signature made for one use never passes for
another.
"""

from __future__ import annotations

import hashlib
import hmac

MIN_SECRET_BYTES = 16


class Signer:
    """Signs and checks messages with a key derived from ``secret`` for ``purpose``."""

    __slots__ = ("_key",)

    def __init__(self, secret: bytes, purpose: str) -> None:
        if len(secret) < MIN_SECRET_BYTES:
            raise ValueError(f"a cluster secret needs at least {MIN_SECRET_BYTES} bytes")
        self._key = hmac.new(secret, b"segmentstore/" + purpose.encode(), hashlib.sha256).digest()

    def sign(self, message: bytes) -> str:
        """The signature of ``message``: 64 hexadecimal digits."""
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()

    def verify(self, message: bytes, signature: str | bytes | None) -> bool:
        """Whether ``signature`` is this key's for ``message`` (in constant time)."""
        if not signature:
            return False
        if isinstance(signature, bytes):
            try:
                signature = signature.decode("ascii")
            except UnicodeDecodeError:
                return False
        return hmac.compare_digest(self.sign(message), signature)

    def __repr__(self) -> str:
        return "Signer(**********)"
