"""What both clients decode: an HTTP answer as a status, its headers and its whole body.

httpx's ``Response`` and the asyncio transport's :class:`Reply` both fit :class:`Answer`, so
the decoders of :mod:`.calls`, the error mapping and the retry rule are written once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol


class Answer(Protocol):
    """A complete answer; ``headers`` look up names case-insensitively."""

    @property
    def status_code(self) -> int: ...

    @property
    def headers(self) -> Mapping[str, str]: ...

    @property
    def content(self) -> bytes: ...


@dataclass(frozen=True, slots=True)
class Reply:
    status_code: int
    headers: Mapping[str, str]  # case-insensitive (the transport's own header map)
    content: bytes
