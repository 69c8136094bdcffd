"""Seal, truncate, merge, transactions, attributes and offsetAt over HTTP."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest


def _append(http: httpx.Client, name: str, data: bytes) -> httpx.Response:
    return http.post(f"/v1/segments/{name.replace('#', '%23')}:append", content=data)


def _info(http: httpx.Client, name: str) -> dict[str, Any]:
    body: dict[str, Any] = http.get(f"/v1/segments/{name.replace('#', '%23')}").json()
    return body


# -- seal --------------------------------------------------------------------------------


def test_seal_answers_the_info_and_is_idempotent(http: httpx.Client, segment: str) -> None:
    _append(http, segment, b"abc")
    first = http.post(f"/v1/segments/{segment}:seal")
    assert first.status_code == 200
    assert first.json()["sealed"] is True and first.json()["length"] == 3
    again = http.post(f"/v1/segments/{segment}:seal")
    assert again.status_code == 200 and again.json()["sealed"] is True


def test_append_to_a_sealed_segment_is_409(http: httpx.Client, segment: str) -> None:
    http.post(f"/v1/segments/{segment}:seal")
    r = _append(http, segment, b"late")
    assert r.status_code == 409 and r.json()["error"]["code"] == "segment_sealed"
    assert _info(http, segment)["length"] == 0


def test_seal_of_a_missing_segment_is_404(http: httpx.Client, name: str) -> None:
    assert http.post(f"/v1/segments/{name}:seal").status_code == 404


# -- truncate ----------------------------------------------------------------------------


def test_truncate(http: httpx.Client, segment: str) -> None:
    _append(http, segment, b"0123456789")
    r = http.post(f"/v1/segments/{segment}:truncate", json={"offset": 6})
    assert r.status_code == 200
    assert (r.json()["start_offset"], r.json()["length"]) == (6, 10)
    below = http.post(f"/v1/segments/{segment}:truncate", json={"offset": 2})
    assert below.status_code == 200 and below.json()["start_offset"] == 6  # a no-op
    at_end = http.post(f"/v1/segments/{segment}:truncate", json={"offset": 10})
    assert at_end.json()["start_offset"] == 10


def test_truncate_beyond_the_length_is_416(http: httpx.Client, segment: str) -> None:
    _append(http, segment, b"abc")
    r = http.post(f"/v1/segments/{segment}:truncate", json={"offset": 4})
    assert r.status_code == 416
    assert r.json()["error"]["code"] == "offset_beyond_end"
    assert _info(http, segment)["start_offset"] == 0


# -- transactions and merge ----------------------------------------------------------------


def _begin(http: httpx.Client, name: str) -> str:
    r = http.post(f"/v1/segments/{name}:beginTransaction")
    assert r.status_code == 201
    transaction: str = r.json()["transaction"]
    assert transaction.startswith(f"{name}#transaction.")
    return transaction


def test_transaction_commit(http: httpx.Client, segment: str) -> None:
    _append(http, segment, b"head-")
    transaction = _begin(http, segment)
    assert _info(http, transaction)["container"] == _info(http, segment)["container"]
    _append(http, transaction, b"tx1,")
    _append(http, transaction, b"tx2")
    _append(http, segment, b"more-")
    r = http.post(f"/v1/segments/{segment}:merge", json={"source": transaction})
    assert r.status_code == 200
    assert r.json() == {"offset": 10, "length": 17}
    assert http.get(f"/v1/segments/{segment}:read", params={"offset": 0}).content == (
        b"head-more-tx1,tx2"
    )
    assert http.get(f"/v1/segments/{transaction.replace('#', '%23')}").status_code == 404


def test_transaction_abort(http: httpx.Client, segment: str) -> None:
    transaction = _begin(http, segment)
    _append(http, transaction, b"never")
    assert http.delete(f"/v1/segments/{transaction.replace('#', '%23')}").status_code == 204
    r = http.post(f"/v1/segments/{segment}:merge", json={"source": transaction})
    assert r.status_code == 404
    assert _info(http, segment)["length"] == 0


def test_begin_transaction_of_a_missing_segment_is_404(http: httpx.Client, name: str) -> None:
    assert http.post(f"/v1/segments/{name}:beginTransaction").status_code == 404


def test_merge_into_a_sealed_target_is_409_and_keeps_the_source(
    http: httpx.Client, segment: str
) -> None:
    transaction = _begin(http, segment)
    _append(http, transaction, b"kept")
    http.post(f"/v1/segments/{segment}:seal")
    r = http.post(f"/v1/segments/{segment}:merge", json={"source": transaction})
    assert r.status_code == 409 and r.json()["error"]["code"] == "segment_sealed"
    read = http.get(f"/v1/segments/{transaction.replace('#', '%23')}:read", params={"offset": 0})
    assert read.content == b"kept"


def test_merge_of_a_truncated_source_is_410(http: httpx.Client, segment: str) -> None:
    transaction = _begin(http, segment)
    _append(http, transaction, b"abcdef")
    http.post(f"/v1/segments/{transaction.replace('#', '%23')}:truncate", json={"offset": 2})
    r = http.post(f"/v1/segments/{segment}:merge", json={"source": transaction})
    assert r.status_code == 410 and r.json()["error"]["code"] == "segment_truncated"
    assert _info(http, transaction)["length"] == 6
    assert _info(http, segment)["length"] == 0


# -- attributes --------------------------------------------------------------------------


def _patch(http: httpx.Client, name: str, *updates: dict[str, Any]) -> httpx.Response:
    return http.patch(f"/v1/segments/{name}:attributes", json={"updates": list(updates)})


def test_all_five_update_types(http: httpx.Client, segment: str) -> None:
    r = _patch(
        http,
        segment,
        {"key": "r", "value": 1, "type": "replace"},
        {"key": "absent", "value": 2, "type": "replace_if_absent"},
        {"key": "max", "value": 5, "type": "replace_if_greater"},
        {"key": "cas", "value": 7, "type": "replace_if_equals", "compare": None},
        {"key": "sum", "value": 3, "type": "accumulate"},
    )
    assert r.status_code == 200
    assert r.json() == {"attributes": {"r": 1, "absent": 2, "max": 5, "cas": 7, "sum": 3}}
    r = _patch(
        http,
        segment,
        {"key": "r", "value": -1},  # "replace" is the default type
        {"key": "max", "value": 9, "type": "replace_if_greater"},
        {"key": "cas", "value": 8, "type": "replace_if_equals", "compare": 7},
        {"key": "sum", "value": -10, "type": "accumulate"},
        {"key": "k.x_y:z-1", "value": (1 << 63) - 1},
    )
    expected = {"r": -1, "absent": 2, "max": 9, "cas": 8, "sum": -7, "k.x_y:z-1": (1 << 63) - 1}
    assert r.json() == {"attributes": expected}
    assert http.get(f"/v1/segments/{segment}:attributes").json() == {"attributes": expected}
    assert _info(http, segment)["attributes"] == expected


@pytest.mark.parametrize(
    "update",
    [
        {"key": "a", "value": 2, "type": "replace_if_absent"},
        {"key": "a", "value": 1, "type": "replace_if_greater"},
        {"key": "a", "value": 0, "type": "replace_if_greater"},
        {"key": "a", "value": 5, "type": "replace_if_equals", "compare": 0},
        {"key": "a", "value": 5, "type": "replace_if_equals", "compare": None},
        {"key": "a", "value": (1 << 63) - 1, "type": "accumulate"},
    ],
    ids=["absent", "greater-equal", "greater-less", "equals", "equals-absent", "overflow"],
)
def test_a_failed_condition_is_412_naming_the_key_and_changes_nothing(
    http: httpx.Client, segment: str, update: dict[str, Any]
) -> None:
    _patch(http, segment, {"key": "a", "value": 1})
    r = _patch(http, segment, {"key": "b", "value": 1}, update)
    assert r.status_code == 412
    error = r.json()["error"]
    assert (error["code"], error["key"]) == ("bad_attribute_update", "a")
    assert http.get(f"/v1/segments/{segment}:attributes").json() == {"attributes": {"a": 1}}


def test_attributes_of_a_missing_segment_are_404(http: httpx.Client, name: str) -> None:
    assert http.get(f"/v1/segments/{name}:attributes").status_code == 404
    assert _patch(http, name, {"key": "a", "value": 1}).status_code == 404


# -- offsetAt ------------------------------------------------------------------------------


def test_offset_at(http: httpx.Client, segment: str) -> None:
    r = http.get(f"/v1/segments/{segment}:offsetAt", params={"timestamp_ms": 0})
    assert r.status_code == 200 and r.json() == {"offset": 0}
    http.post(f"/v1/segments/{segment}:append", content=b"x" * 100)
    later = int(time.time() * 1000) + 60_000
    r = http.get(f"/v1/segments/{segment}:offsetAt", params={"timestamp_ms": later})
    assert r.status_code == 200 and r.json() == {"offset": 100}  # nothing made after it yet
    r = http.get(f"/v1/segments/{segment}:offsetAt", params={"timestamp_ms": "soon"})
    assert r.status_code == 400


def test_retention_is_set_at_create_and_replaced_later(http: httpx.Client, name: str) -> None:
    r = http.put(f"/v1/segments/{name}", json={"retention": {"bytes": 1000}})
    assert r.status_code == 201 and r.json()["retention"] == {"bytes": 1000}
    r = http.put(f"/v1/segments/{name}:retention", json={"time_ms": 60_000})
    assert r.status_code == 200 and r.json()["retention"] == {"time_ms": 60_000}
    r = http.put(f"/v1/segments/{name}:retention", json={"time_ms": -1})
    assert r.status_code == 400
    r = http.put(f"/v1/segments/{name}:retention", json={"kept": 5})
    assert r.status_code == 400
    assert http.get(f"/v1/segments/{name}").json()["retention"] == {"time_ms": 60_000}
    r = http.put(f"/v1/segments/{name}:retention", json={})
    assert r.status_code == 200 and r.json()["retention"] == {}
    assert http.put("/v1/segments/no/such:retention", json={}).status_code == 404
