"""Bearer-token auth for ``/v1`` (docs/api.md, Auth).

A token has a role; roles are ordered ``read < write < admin``. What a request needs follows
from its method and path alone, so it is decided before routing, before the body is read and
before any argument is validated (a client without a good token learns nothing else):

- ``GET`` (and ``HEAD``) under ``/v1``: ``read``;
- anything else under ``/v1/containers``: ``admin`` (restart);
- anything else under ``/v1``: ``write`` (everything that changes a segment).

With no tokens configured everyone may do everything. ``/healthz``, ``/readyz``, ``/metrics``,
the OpenAPI document and the status page's static files (``/ui/``: they hold no data, and the
page's script calls ``/v1`` with the token the person gives) are never behind auth. Tokens are
compared in constant time and never logged or echoed.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from enum import IntEnum

from segmentstore.contracts.errors import ForbiddenError, SegmentStoreError, UnauthorizedError


class Role(IntEnum):
    READ = 1
    WRITE = 2
    ADMIN = 3


def parse_tokens(tokens: Mapping[str, str]) -> dict[bytes, Role]:
    """``token -> role name`` as configured; ``ValueError`` on an unknown role or empty token."""
    parsed = {}
    for token, role in tokens.items():
        if not token:
            raise ValueError("an auth token must not be empty")
        try:
            parsed[token.encode()] = Role[role.upper()]
        except KeyError:
            raise ValueError(f"unknown role {role!r}: read, write or admin") from None
    return parsed


def required_role(method: str, path: str) -> Role | None:
    """The role a request needs, or None if the path is not behind auth."""
    if not (path == "/v1" or path.startswith("/v1/")):
        return None
    if method in ("GET", "HEAD"):
        return Role.READ
    if path.startswith("/v1/containers"):
        return Role.ADMIN
    return Role.WRITE


def role_of(tokens: Mapping[bytes, Role], presented: bytes) -> Role | None:
    """The role of the ``presented`` token, None if it is no known token."""
    found = None
    # No early exit: the time taken does not tell which token came close.
    for token, role in tokens.items():
        if hmac.compare_digest(token, presented):
            found = role
    return found


def _bearer(header: bytes | None) -> bytes | None:
    if header is None:
        return None
    scheme, _, token = bytes(header).strip().partition(b" ")
    token = token.strip()
    return token if scheme.lower() == b"bearer" and token else None


class TokenAuth:
    """The rule above over the configured tokens (none: everyone may do everything)."""

    def __init__(self, tokens: Mapping[str, str] | None = None) -> None:
        self._tokens = parse_tokens(tokens or {})

    def refusal(
        self, method: str, path: str, authorization: bytes | None
    ) -> SegmentStoreError | None:
        """Why a request with this ``Authorization`` header may not go on; None if it may."""
        if not self._tokens:
            return None
        needed = required_role(method, path)
        if needed is None:
            return None
        presented = _bearer(authorization)
        role = None if presented is None else role_of(self._tokens, presented)
        if role is None:
            return UnauthorizedError("a known bearer token is needed")
        if role < needed:
            return ForbiddenError(
                f"this needs the {needed.name.lower()} role; the token has {role.name.lower()}"
            )
        return None
