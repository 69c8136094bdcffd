"""Errors as HTTP answers (docs/api.md, Errors), and the handlers that apply it.

Every answer that is not a success goes through :func:`error_response`, whichever layer
noticed the problem: the store (``SegmentStoreError`` leaves, answered with the status their
class declares, :mod:`segmentstore.contracts.errors`),
FastAPI's request validation and JSON parsing (``400 invalid_argument``), Starlette's routing
(``404``/``405``), the body limit (``413``), auth (``401``/``403``) and, as a last resort, any
other exception (``500 internal``, logged with its traceback, never shown to the client).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from segmentstore.contracts.errors import (
    InvalidArgumentError,
    PayloadTooLargeError,
    SegmentStoreError,
    leaf_error_classes,
)

log = logging.getLogger(__name__)

# Statuses after which a client should come back later: they carry ``Retry-After``.
RETRY_STATUSES = frozenset(cls.status for cls in leaf_error_classes() if cls.retry_after)
_DEFAULT_RETRY_AFTER_MS = 1000

# Starlette's own refusals (no route, wrong method) have no store error; docs/api.md is silent on
# them, so they get codes of their own in the same body shape.
_HTTP_CODES = {404: "not_found", 405: "method_not_allowed"}


class RefusedBody(HTTPException):
    """A request body refused while it streamed in, answered as ``error``.

    An ``HTTPException`` rather than the store's error itself because FastAPI turns any other
    exception raised while it reads a JSON body into a plain 400.
    """

    def __init__(self, error: SegmentStoreError) -> None:
        super().__init__(status_code=error.status, detail=error.message)
        self.error = error


class BodyTooLarge(RefusedBody):
    """A request body that outgrew its limit while it streamed in."""

    def __init__(self, error: PayloadTooLargeError) -> None:
        super().__init__(error)


def error_json(
    status: int,
    code: str,
    message: str,
    fields: Mapping[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """The one error shape: ``{"error": {"code", "message", ...fields}}``."""
    body = {"code": code, "message": message, **(fields or {})}
    headers = dict(headers or {})
    if status in RETRY_STATUSES:
        retry_ms = body.get("retry_after_ms") or _DEFAULT_RETRY_AFTER_MS
        headers["Retry-After"] = str(max(1, math.ceil(retry_ms / 1000)))
    if status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    return JSONResponse({"error": body}, status_code=status, headers=headers)


def error_response(error: SegmentStoreError) -> JSONResponse:
    """The answer to ``error``: the status and code its class declares, and its fields."""
    return error_json(error.status, error.code, error.message, error.fields())


def _validation_message(error: RequestValidationError) -> str:
    parts = []
    for item in error.errors():
        where = ".".join(str(part) for part in item.get("loc", ()))
        parts.append(f"{where}: {item.get('msg', 'invalid')}")
    return "; ".join(parts) or "invalid request"


async def _store_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, SegmentStoreError)
    return error_response(exc)


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    # Bad JSON arrives here too (FastAPI reports it as a ``json_invalid`` validation error).
    assert isinstance(exc, RequestValidationError)
    return error_response(InvalidArgumentError(_validation_message(exc)))


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    if isinstance(exc, RefusedBody):
        return error_response(exc.error)
    code = _HTTP_CODES.get(exc.status_code, "invalid_argument")
    if exc.status_code >= 500:
        code = "internal"
    # Starlette's headers (``Allow`` on a 405) are kept.
    return error_json(exc.status_code, code, str(exc.detail), headers=exc.headers)


def internal_error(method: str, path: str, exc: BaseException) -> JSONResponse:
    """The last resort: the answer to an exception nothing else mapped. A bug: the traceback
    goes to the log (the path, never the headers: they hold tokens); the client gets the
    usual shape and no internals."""
    log.error("unhandled error in %s %s", method, path, exc_info=exc)
    return error_json(500, "internal", "internal error")


async def _unexpected_error(request: Request, exc: Exception) -> JSONResponse:
    return internal_error(request.method, request.url.path, exc)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(SegmentStoreError, _store_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected_error)
