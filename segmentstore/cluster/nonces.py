"""Each forwarded request's nonce accepted once: a request captured on its way between two
nodes and sent again is refused, however soon.

A signature is honoured only while it is young (``max_age_ms`` after it was made, a little
longer for clock skew), so a nonce needs remembering only that long: :class:`NonceLedger`
keeps each until its signature would be refused anyway, and forgets it then. Its size is the
rate of forwarded requests times that window.
"""

from __future__ import annotations

from collections import deque


class NonceLedger:
    def __init__(self, keep_ms: int) -> None:
        self._keep_ms = keep_ms
        self._seen: set[str] = set()
        self._order: deque[tuple[float, str]] = deque()  # (forget at ms, nonce), oldest first

    def first_use(self, nonce: str, now_ms: float) -> bool:
        """Whether ``nonce`` is new (it is remembered from now on); False for one seen within
        the window."""
        order = self._order
        while order and order[0][0] <= now_ms:
            self._seen.discard(order.popleft()[1])
        if nonce in self._seen:
            return False
        self._seen.add(nonce)
        order.append((now_ms + self._keep_ms, nonce))
        return True

    def __len__(self) -> int:
        return len(self._seen)
