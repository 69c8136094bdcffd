"""docs/api.md is the contract: every route the app serves is in it, under its operationId,
and the OpenAPI document describes the raw and the framed bodies."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi import FastAPI
from starlette.routing import Route

from segmentstore import SegmentStore
from segmentstore.api.app import create_app

DOCUMENT = Path(__file__).resolve().parents[2] / "docs" / "api.md"


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> FastAPI:
    store = SegmentStore.open(tmp_path_factory.mktemp("contract"))  # never started
    return create_app(store, {"t": "admin"})


@pytest.fixture(scope="module")
def text() -> str:
    return DOCUMENT.read_text()


def test_every_route_of_the_app_is_in_the_document(app: FastAPI, text: str) -> None:
    served = {
        (method, route.path_format)
        for route in app.state.routes
        if isinstance(route, Route)
        for method in route.methods or ()
        if method != "HEAD"
    }
    # Hidden from OpenAPI, still served: the answer to a POST without a known action.
    assert ("POST", "/v1/segments/{name}") in served
    assert len(served) >= 25
    missing = sorted(f"{m} {p}" for m, p in served if f"`{m} {p}`" not in text)
    assert not missing, f"routes missing from docs/api.md: {missing}"


def test_every_operation_is_named_and_documented(app: FastAPI, text: str) -> None:
    for path, operations in app.openapi()["paths"].items():
        for method, operation in operations.items():
            operation_id = operation["operationId"]
            # A name of its own, not FastAPI's default (append_v1_segments__name__append_post).
            assert "_" not in operation_id and operation_id[0].islower(), operation_id
            assert f"| `{method.upper()} {path}` | `{operation_id}` |" in text, operation_id


def test_the_raw_and_framed_bodies_are_in_the_schema(app: FastAPI) -> None:
    paths = app.openapi()["paths"]
    framed = paths["/v1/segments/{name}:appendEvents"]["post"]["requestBody"]
    assert "big-endian int32" in framed["description"]
    schema = framed["content"]["application/octet-stream"]["schema"]
    assert schema["format"] == "binary" and "big-endian int32" in schema["description"]
    raw = paths["/v1/segments/{name}:append"]["post"]["requestBody"]
    assert "raw bytes" in raw["description"]
    answers = paths["/v1/segments/{name}:readEvents"]["get"]["responses"]
    assert "framing" in answers["200"]["description"]
