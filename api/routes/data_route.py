"""A data route: a route the gate serves straight from its handler, and what it declares.

A :class:`DataRoute` is a Starlette route (its template matches paths for the metrics and
lists it among the app's routes) whose app is its one handler. What FastAPI would read from a
handler's signature, it declares: its integer query parameters (:class:`IntParam`, which the
handler parses with :func:`query_ints` and the OpenAPI document lists from the same entries),
its headers, body and answers. :meth:`DataRoute.operation` is its OpenAPI operation.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from pydantic import BaseModel
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from segmentstore.api.head import RequestHead
from segmentstore.api.loop_metrics import LoopHistogram
from segmentstore.api.metrics import Metrics
from segmentstore.api.schemas import error_descriptions
from segmentstore.contracts.errors import InvalidArgumentError, SegmentStoreError

SEGMENTS = "/v1/segments/"
# Where the gate leaves a data request in its scope, for the route's handler.
DATA_REQUEST = "segmentstore.data_request"
OCTET_STREAM = "application/octet-stream"
BINARY: dict[str, Any] = {"type": "string", "format": "binary"}
ERROR_BODY = "#/components/schemas/ErrorBody"
# The common query: plain decimal values, no repeats. Anything else takes the long way.
_PLAIN = re.compile(r"([a-z_]+)=([0-9]{1,19})")


@dataclass(frozen=True, slots=True)
class IntParam:
    """An integer parameter of a request: in its query, or in a header."""

    name: str
    description: str
    required: bool = False
    default: int | None = None

    def schema(self) -> dict[str, Any]:
        if self.required:
            return {"type": "integer"}
        if self.default is not None:
            return {"type": "integer", "default": self.default}
        return {"anyOf": [{"type": "integer"}, {"type": "null"}]}


def parse_int(what: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise InvalidArgumentError(f"{what} must be an integer, not {text[:64]!r}") from None


def header_int(what: str, value: bytes | None) -> int | None:
    return None if value is None else parse_int(what, value.decode("latin-1"))


def query_ints(query_string: bytes, params: tuple[IntParam, ...]) -> dict[str, int]:
    """The values of ``params`` in the query (a repeated one: the last); ``400
    invalid_argument`` for one that is no integer or a required one missing. Parameters the
    route does not declare are ignored."""
    if not query_string:
        found: dict[str, int] | None = {}
    else:
        found = _plain_query(query_string)
    if found is None:
        given = dict(parse_qsl(query_string.decode("latin-1"), keep_blank_values=True))
        found = {p.name: parse_int(p.name, given[p.name]) for p in params if p.name in given}
    for param in params:
        if param.required and param.name not in found:
            raise InvalidArgumentError(f"the query parameter {param.name} is required")
    return found


def _plain_query(query_string: bytes) -> dict[str, int] | None:
    query: dict[str, int] = {}
    for part in query_string.decode("latin-1").split("&"):
        plain = _PLAIN.fullmatch(part)
        if plain is None or plain.group(1) in query:
            return None
        query[plain.group(1)] = int(plain.group(2))
    return query


@dataclass(slots=True)
class DataRequest:
    """A request for a data route, as the gate found it."""

    route: DataRoute
    name: str
    head: RequestHead


Handler = Callable[[DataRequest, Scope, Receive, Send], Awaitable[None]]


class DataRoute(Route):
    """One data route: ``method`` on ``/v1/segments/{name}`` followed by ``action``."""

    def __init__(
        self,
        method: str,
        action: str,
        handler: Handler,
        metrics: Metrics,
        *,
        operation_id: str,
        summary: str,
        answers: Mapping[int, dict[str, Any]],
        errors: tuple[type[SegmentStoreError], ...],
        query: tuple[IntParam, ...] = (),
        headers: tuple[dict[str, Any], ...] = (),
        body: dict[str, Any] | None = None,
        models: tuple[type[BaseModel], ...] = (),
    ) -> None:
        super().__init__(SEGMENTS + "{name:path}" + action, endpoint=self, methods=[method])
        self.method = method
        self.action = action
        self.handler = handler
        self.operation_id = operation_id
        self.summary = summary
        self.answers = answers
        self.errors = errors
        self.query = query
        self.headers = headers
        self.body = body
        self.models = models
        self._metrics = metrics
        self._histograms: dict[int, LoopHistogram] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.handler(scope[DATA_REQUEST], scope, receive, send)

    def observe(self, status: int, seconds: float) -> None:
        """One request answered: its latency histogram is found once per status, not by its
        labels every time."""
        histogram = self._histograms.get(status)
        if histogram is None:
            histogram = self._histograms[status] = self._metrics.histogram(
                self.method, self.path_format, status
            )
        histogram.observe(seconds)

    def operation(self, security: list[dict[str, list[str]]]) -> dict[str, Any]:
        """This route's OpenAPI operation, from what it declares."""
        name = {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}
        query = [
            {"name": p.name, "in": "query", "required": p.required, "schema": p.schema(),
             "description": p.description}
            for p in self.query
        ]  # fmt: skip
        responses: dict[str, Any] = {str(status): answer for status, answer in self.answers.items()}
        error = {"content": {"application/json": {"schema": {"$ref": ERROR_BODY}}}}
        for status, description in error_descriptions(*self.errors).items():
            responses[str(status)] = {**error, "description": description}
        responses["default"] = {**error, "description": "any error"}
        operation: dict[str, Any] = {
            "tags": ["data"],
            "summary": self.summary,
            "operationId": self.operation_id,
            "parameters": [name, *query, *self.headers],
            "responses": responses,
        }
        if security:
            operation["security"] = security
        if self.body is not None:
            operation["requestBody"] = self.body
        return operation


def model_answer(
    model: type[BaseModel], description: str = "Successful Response"
) -> dict[str, Any]:
    """An answer that is JSON in the shape of ``model`` (a schema of the document)."""
    schema = {"$ref": f"#/components/schemas/{model.__name__}"}
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def document(paths: dict[str, Any], schemas: dict[str, Any], routes: tuple[DataRoute, ...],
             security: list[dict[str, list[str]]]) -> None:  # fmt: skip
    """Adds each of ``routes`` to an OpenAPI document's ``paths``, and the models of their
    answers to its ``schemas``."""
    for route in routes:
        path = route.path_format
        paths.setdefault(path, {})[route.method.lower()] = route.operation(security)
        for model in route.models:
            schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
            schemas.update(schema.pop("$defs", {}))
            schemas[model.__name__] = schema
