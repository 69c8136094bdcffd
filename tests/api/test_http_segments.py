"""Segments as resources over HTTP: create, info, delete, list (docs/api.md, Routes and Info)."""

from __future__ import annotations

import uuid
from typing import Any

import httpx

INFO_FIELDS = {
    "name", "container", "start_offset", "length", "storage_length", "sealed", "created_ms",
    "last_modified_ms", "retention", "attributes",
}  # fmt: skip


def test_create_answers_201_with_the_info(http: httpx.Client, name: str) -> None:
    r = http.put(f"/v1/segments/{name}")
    assert r.status_code == 201
    info = r.json()
    assert set(info) == INFO_FIELDS
    assert info["name"] == name
    assert (info["start_offset"], info["length"], info["storage_length"]) == (0, 0, 0)
    assert info["sealed"] is False
    assert info["attributes"] == {} and info["retention"] == {}
    assert http.get(f"/v1/segments/{name}").json() == info


def test_create_with_attributes_and_retention(http: httpx.Client, name: str) -> None:
    body = {"attributes": {"a": 1, "b": -(1 << 63)}, "retention": {"time_ms": 60000, "bytes": 10}}
    info = http.put(f"/v1/segments/{name}", json=body).json()
    assert info["attributes"] == body["attributes"]
    assert info["retention"] == body["retention"]
    assert http.get(f"/v1/segments/{name}:attributes").json() == {"attributes": body["attributes"]}


def test_create_twice_is_409_segment_exists(http: httpx.Client, segment: str) -> None:
    r = http.put(f"/v1/segments/{segment}")
    assert r.status_code == 409
    assert r.json()["error"]["code"] == "segment_exists"


def test_info_of_a_missing_segment_is_404(http: httpx.Client, name: str) -> None:
    r = http.get(f"/v1/segments/{name}")
    assert r.status_code == 404
    assert r.json()["error"]["code"] == "segment_not_found"


def test_info_after_appends(http: httpx.Client, segment: str) -> None:
    http.post(f"/v1/segments/{segment}:append", content=b"abc")
    info = http.get(f"/v1/segments/{segment}").json()
    assert info["length"] == 3
    assert info["start_offset"] <= info["length"] and info["storage_length"] <= info["length"]
    assert info["last_modified_ms"] >= info["created_ms"]


def test_delete_then_a_second_delete_is_404(http: httpx.Client, segment: str) -> None:
    r = http.delete(f"/v1/segments/{segment}")
    assert r.status_code == 204 and r.content == b""
    assert http.get(f"/v1/segments/{segment}").status_code == 404
    second = http.delete(f"/v1/segments/{segment}")
    assert second.status_code == 404
    assert second.json()["error"]["code"] == "segment_not_found"


def test_a_deleted_name_can_be_created_again_and_starts_empty(
    http: httpx.Client, segment: str
) -> None:
    http.post(f"/v1/segments/{segment}:append", content=b"old data")
    http.delete(f"/v1/segments/{segment}")
    assert http.put(f"/v1/segments/{segment}").json()["length"] == 0
    assert http.get(f"/v1/segments/{segment}:read", params={"offset": 0}).status_code == 204


def test_hash_in_a_name_is_sent_percent_encoded(http: httpx.Client) -> None:
    name = f"s/{uuid.uuid4().hex[:8]}#x~y"
    encoded = name.replace("#", "%23")
    assert http.put(f"/v1/segments/{encoded}").json()["name"] == name
    assert http.post(f"/v1/segments/{encoded}:append", content=b"z").json()["length"] == 1


def _page(http: httpx.Client, **params: Any) -> dict[str, Any]:
    r = http.get("/v1/segments", params=params)
    assert r.status_code == 200
    body: dict[str, Any] = r.json()
    return body


def test_list_pages_through_a_prefix_in_code_point_order(http: httpx.Client) -> None:
    prefix = f"list-{uuid.uuid4().hex[:8]}/"
    # Code point order: upper case before lower case, "#" and "-" before letters.
    names = [prefix + n for n in ("b", "B", "a", "a#transaction.1", "a-b", "c/0", "c/1")]
    for n in names:
        http.put(f"/v1/segments/{n.replace('#', '%23')}")
    assert _page(http, prefix=prefix)["segments"] == sorted(names)
    assert _page(http, prefix=prefix) == {"segments": sorted(names), "next": None}

    seen: list[str] = []
    after = None
    while True:
        params: dict[str, Any] = {"prefix": prefix, "limit": 3}
        if after is not None:
            params["after"] = after
        page = _page(http, **params)
        assert len(page["segments"]) <= 3
        seen += page["segments"]
        if page["next"] is None:
            break
        assert page["next"] == page["segments"][-1]
        after = page["next"]
    assert seen == sorted(names)

    exact = _page(http, prefix=prefix, limit=len(names))
    assert exact == {"segments": sorted(names), "next": None}
    assert _page(http, prefix=prefix + "c/")["segments"] == [prefix + "c/0", prefix + "c/1"]
    assert _page(http, prefix=prefix + "zzz") == {"segments": [], "next": None}


def test_list_lists_transaction_segments(http: httpx.Client, segment: str) -> None:
    transaction = http.post(f"/v1/segments/{segment}:beginTransaction").json()["transaction"]
    assert _page(http, prefix=segment)["segments"] == [segment, transaction]


def test_list_limit_defaults_to_100_and_is_capped_at_1000(http: httpx.Client) -> None:
    prefix = f"many-{uuid.uuid4().hex[:8]}/"
    with httpx.Client(base_url=str(http.base_url), timeout=30) as plain:
        for i in range(101):
            assert plain.put(f"/v1/segments/{prefix}{i:03d}").status_code == 201
    default = _page(http, prefix=prefix)
    assert len(default["segments"]) == 100 and default["next"] == f"{prefix}099"
    assert _page(http, prefix=prefix, after=default["next"])["segments"] == [f"{prefix}100"]
    capped = _page(http, prefix=prefix, limit=5000)
    assert len(capped["segments"]) == 101 and capped["next"] is None


def test_list_takes_every_spelling_of_a_limit_the_api_accepts(http: httpx.Client) -> None:
    """A node of several workers or a cluster merges pages by the limit again: it must read it
    as each node did (the HTTP layer takes "1.0", " 2", "+2" and "1_0" as integers)."""
    prefix = f"spelled-{uuid.uuid4().hex[:8]}/"
    names = [f"{prefix}{i:02d}" for i in range(12)]
    for n in names:
        assert http.put(f"/v1/segments/{n}").status_code == 201
    for spelled, size in (("1.0", 1), (" 2", 2), ("+2", 2), ("1_0", 10)):
        page = _page(http, prefix=prefix, limit=spelled)
        assert page == {"segments": names[:size], "next": names[size - 1]}, spelled


def test_list_refuses_a_limit_below_one(http: httpx.Client) -> None:
    for limit in ("0", "-1", "ten"):
        r = http.get("/v1/segments", params={"limit": limit})
        assert r.status_code == 400, limit
        assert r.json()["error"]["code"] == "invalid_argument"


def test_json_bodies_are_read_whatever_their_declared_type(http: httpx.Client, name: str) -> None:
    # What `curl -d '{...}'` sends: a form content type around a JSON document.
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    r = http.put(f"/v1/segments/{name}", content=b'{"attributes": {"a": 1}}', headers=form)
    assert r.status_code == 201, r.text
    assert r.json()["attributes"] == {"a": 1}
    r = http.post(f"/v1/segments/{name}:truncate", content=b'{"offset": 0}', headers=form)
    assert r.status_code == 200, r.text
