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
        # Some leaves (KeyNotFoundError, ...) never set the fields they declare.
        status = getattr(error, "code", None)
        code = getattr(error, "err_code", None)
        codes = []
        if status:
            codes.append(f"status {status}")
        if code:
            codes.append(f"code {code}")
        description = getattr(error, "description", None) or type(error).__name__
        return f"{description} ({', '.join(codes)})" if codes else description
    text = str(error)
    name = type(error).__name__
    return f"{name}: {text}" if text and text != name else name
