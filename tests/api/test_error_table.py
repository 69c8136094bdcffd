"""An error is declared once, by its class; everything else said of it derives from there.

The HTTP answer, docs/api.md's table, the public exports, the client's exceptions and
retries, and the OpenAPI document's error answers: each is checked against the classes of
``segmentstore.contracts.errors``, and none holds a list of errors of its own.
"""

from __future__ import annotations

import json

import pytest
from error_samples import documented_errors, samples

import segmentstore.contracts.errors as e
from segmentstore import SegmentStore
from segmentstore.api.app import create_app
from segmentstore.api.errors import error_response
from segmentstore.client.retry import RETRY_STATUSES
from segmentstore.contracts.errors import SegmentStoreError, leaf_error_classes

# What the HTTP layer answers with no store error behind it (Starlette's routing).
HTTP_ONLY = {404: {"not_found"}, 405: {"method_not_allowed"}}


@pytest.mark.parametrize("error", samples(), ids=lambda error: type(error).__name__)
def test_every_leaf_is_answered_as_its_class_declares(error: SegmentStoreError) -> None:
    response = error_response(error)
    assert response.status_code == type(error).status
    body = json.loads(bytes(response.body))
    assert body == {"error": {"code": error.code, "message": error.message, **error.fields()}}
    assert ("Retry-After" in response.headers) == type(error).retry_after
    if type(error).retry_after:
        assert int(response.headers["Retry-After"]) >= 1


def test_the_table_of_api_md_is_the_classes() -> None:
    declared: dict[int, set[str]] = {}
    fields: dict[int, set[str]] = {}
    for cls in leaf_error_classes():
        declared.setdefault(cls.status, set()).add(cls.code)
        fields.setdefault(cls.status, set()).update(cls._field_names)
    for status, codes in HTTP_ONLY.items():
        declared.setdefault(status, set()).update(codes)
    documented = documented_errors()
    assert {s: d.codes for s, d in documented.items()} == declared
    assert {s: d.fields for s, d in documented.items() if d.fields} == {
        s: f for s, f in fields.items() if f
    }
    retried = {cls.status for cls in leaf_error_classes() if cls.retry_after}
    assert {s for s, d in documented.items() if d.retry_after} == retried


def test_the_client_retries_what_the_classes_say() -> None:
    assert {cls.status for cls in leaf_error_classes() if cls.retry_after} == RETRY_STATUSES


def test_the_docstring_tree_names_every_leaf_with_its_code() -> None:
    doc = e.__doc__ or ""
    for cls in leaf_error_classes():
        line = next((li for li in doc.splitlines() if f" {cls.__name__} " in li), "")
        assert f" {cls.code}" in line, cls.__name__


def test_the_openapi_error_answers_are_the_classes_of_each_route() -> None:
    app = create_app(SegmentStore.open("/nonexistent/error-table"))
    codes = {cls.code: cls.status for cls in leaf_error_classes()}
    seen = set()
    for operations in app.openapi()["paths"].values():
        for operation in operations.values():
            for status, answer in operation["responses"].items():
                if not status.isdigit() or int(status) < 400:
                    continue
                listed = answer["description"].split(": ", 1)[1].split(", ")
                assert listed and all(codes[code] == int(status) for code in listed), listed
                seen.update(listed)
    assert seen <= set(codes)


def test_retry_after_is_in_whole_seconds_rounded_up() -> None:
    assert error_response(e.ThrottledError("x", retry_after_ms=2500)).headers["Retry-After"] == "3"
    assert error_response(e.ThrottledError("x", retry_after_ms=1)).headers["Retry-After"] == "1"


def test_fields_sit_inside_the_error_object() -> None:
    body = json.loads(bytes(error_response(e.BadOffsetError("s", 3, 5)).body))
    assert body["error"]["expected_offset"] == 3 and body["error"]["length"] == 5
    assert set(body) == {"error"}
