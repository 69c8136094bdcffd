"""NATS errors as a person reads them: the server's own description and error code.

nats-py's exceptions print as their class name alone (``BadRequestError()``), which hides
what the server said, such as ``maximum consumers limit reached (10026)``.
"""

from __future__ import annotations

from nats.js.errors import APIError


def describe(error: BaseException) -> str:
    """``error`` in one line: for a JetStream API error, the server's description, status
    and error code; otherwise the exception's class and text."""
    if isinstance(error, APIError):
        codes = []
        if error.code:
            codes.append(f"status {error.code}")
        if error.err_code:
            codes.append(f"code {error.err_code}")
        description = error.description or type(error).__name__
        return f"{description} ({', '.join(codes)})" if codes else description
    text = str(error)
    name = type(error).__name__
    return f"{name}: {text}" if text and text != name else name
