"""When a failed request is tried again, and after how long: the one retry rule of both clients.

A request is retried only where a retry cannot change the outcome:

- a connection that was never made (``ConnectError``, ``ConnectTimeout``, ``PoolTimeout``):
  nothing was sent, so any request may go again;
- a failure after sending (read timeout, connection reset, server gone) or an answer of
  ``429 throttled`` / ``503 container_unavailable``: only for requests that are idempotent.
  Reads, seal, truncate and replace-only attribute updates are. An append is only when it
  carries ``Writer-Id``/``Writer-Seq``: the retry sends the same sequence number, so if the
  first attempt was applied the store answers ``duplicate: true`` and appends nothing.

Waits grow exponentially with jitter up to ``max_backoff_s``; an answer's ``Retry-After``
(or the more precise ``retry_after_ms`` in its body) replaces the backoff. Retries stop after
``max_attempts`` or once the next wait would pass ``deadline_s`` from the first attempt.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

import httpx

from segmentstore.contracts.errors import leaf_error_classes

from .reply import Answer

# The statuses of the errors that say "send it again later" (429 throttled, 503 unavailable).
RETRY_STATUSES = frozenset(cls.status for cls in leaf_error_classes() if cls.retry_after)

# Raised before a byte of the request left this process.
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
# Failures a later attempt may not meet; an unsupported URL scheme or a request httpx could
# not write (LocalProtocolError) would fail the same way every time.
_TRANSIENT = (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_attempts: int = 6
    initial_backoff_s: float = 0.05
    max_backoff_s: float = 2.0
    deadline_s: float = 30.0

    @classmethod
    def never(cls) -> RetryPolicy:
        return cls(max_attempts=1)


def retry_after_s(response: Answer) -> float | None:
    """How long the server asked to wait, if it did."""
    try:
        detail = json.loads(response.content)["error"]
        milliseconds = detail.get("retry_after_ms")
        if isinstance(milliseconds, int | float) and milliseconds >= 0:
            return float(milliseconds) / 1000
    except (ValueError, TypeError, KeyError, AttributeError):
        pass
    header = response.headers.get("Retry-After")
    if header is None:
        return None
    try:
        return max(0.0, float(header))
    except ValueError:
        pass
    try:
        return max(0.0, float(parsedate_to_datetime(header).timestamp()) - time.time())
    except (TypeError, ValueError):
        return None


class Attempts:
    """The retry state of one request: after each failure, the wait before the next attempt,
    or ``None`` to give up and raise."""

    def __init__(self, policy: RetryPolicy, idempotent: bool) -> None:
        self._policy = policy
        self._idempotent = idempotent
        self._started = time.monotonic()
        self.count = 1  # attempts made so far (the caller makes the first before asking)

    def after_exception(self, error: httpx.TransportError) -> float | None:
        if not isinstance(error, _TRANSIENT):
            return None
        if not (self._idempotent or isinstance(error, _NOT_SENT)):
            return None
        return self._next(None)

    def after_response(self, response: Answer) -> float | None:
        if not self._idempotent or response.status_code not in RETRY_STATUSES:
            return None
        return self._next(retry_after_s(response))

    def _next(self, asked_s: float | None) -> float | None:
        policy = self._policy
        if self.count >= policy.max_attempts:
            return None
        if asked_s is None:
            ceiling = min(policy.max_backoff_s, policy.initial_backoff_s * 2.0 ** (self.count - 1))
            # Half fixed, half random: spreads many clients retrying after one outage.
            delay = ceiling / 2 + random.uniform(0, ceiling / 2)
        else:
            delay = asked_s
        if time.monotonic() - self._started + delay > policy.deadline_s:
            return None
        self.count += 1
        return delay
