"""Bearer tokens and roles (docs/api.md, Auth) against a server configured with three tokens."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

ROLES = ("read", "write", "admin")
UNKNOWN = [
    {},
    {"Authorization": "Bearer nope"},
    {"Authorization": "Basic cmVhZC10b2tlbg=="},
    {"Authorization": "Bearer"},
    {"Authorization": "Bearer read-token2"},
    {"Authorization": "read-token"},
]


@pytest.fixture(scope="module")
def seg(secured: Any) -> Iterator[str]:
    name = f"auth/{uuid.uuid4().hex[:8]}"
    with secured.client("admin-token") as admin:
        assert admin.put(f"/v1/segments/{name}").status_code == 201
        admin.post(f"/v1/segments/{name}:append", content=b"data")
    yield name


# (method, path, keyword arguments, the lowest role allowed)
def _requests(seg: str) -> list[tuple[str, str, dict[str, Any], str]]:
    fresh = f"auth/{uuid.uuid4().hex[:8]}"
    return [
        ("GET", f"/v1/segments/{seg}", {}, "read"),
        ("GET", "/v1/segments", {}, "read"),
        ("GET", f"/v1/segments/{seg}:read", {"params": {"offset": 0}}, "read"),
        ("GET", f"/v1/segments/{seg}:readEvents", {"params": {"offset": 4}}, "read"),
        ("GET", f"/v1/segments/{seg}:attributes", {}, "read"),
        ("GET", f"/v1/segments/{seg}:offsetAt", {"params": {"timestamp_ms": 0}}, "read"),
        ("GET", "/v1/containers", {}, "read"),
        ("PUT", f"/v1/segments/{fresh}", {}, "write"),
        ("POST", f"/v1/segments/{seg}:append", {"content": b"x"}, "write"),
        ("POST", f"/v1/segments/{seg}:appendEvents", {"content": b"\0" * 8}, "write"),
        ("POST", f"/v1/segments/{seg}:truncate", {"json": {"offset": 0}}, "write"),
        ("POST", f"/v1/segments/{seg}:beginTransaction", {}, "write"),
        ("POST", f"/v1/segments/{seg}:merge", {"json": {"source": fresh}}, "write"),
        ("PATCH", f"/v1/segments/{seg}:attributes", {"json": {"updates": []}}, "write"),
        ("POST", f"/v1/segments/{fresh}x:seal", {}, "write"),
        ("DELETE", f"/v1/segments/{fresh}y", {}, "write"),
        ("POST", "/v1/containers/3:restart", {}, "admin"),
    ]


def test_every_v1_route_needs_a_token_of_the_right_role(secured: Any, seg: str) -> None:
    with secured.client() as anonymous:
        before = anonymous.get("/v1/containers", headers={"Authorization": "Bearer admin-token"})
        epochs = [c["epoch"] for c in before.json()["containers"]]
        for method, path, kwargs, lowest in _requests(seg):
            for headers in UNKNOWN:
                r = anonymous.request(method, path, headers=headers, **kwargs)
                assert r.status_code == 401, (method, path, headers)
                assert r.json()["error"]["code"] == "unauthorized"
                assert r.headers["WWW-Authenticate"] == "Bearer"
            for role in ROLES:
                r = anonymous.request(
                    method, path, headers={"Authorization": f"Bearer {role}-token"}, **kwargs
                )
                if ROLES.index(role) < ROLES.index(lowest):
                    assert r.status_code == 403, (method, path, role)
                    assert r.json()["error"]["code"] == "forbidden"
                else:
                    assert r.status_code not in (401, 403), (method, path, role, r.text)
        # Refused requests changed nothing: only the admin's restart of container 3 ran.
        after = anonymous.get("/v1/containers", headers={"Authorization": "Bearer read-token"})
        assert [c["epoch"] for c in after.json()["containers"]][:3] == epochs[:3]


def test_the_scheme_is_case_insensitive(secured: Any, seg: str) -> None:
    with secured.client() as client:
        r = client.get(f"/v1/segments/{seg}", headers={"Authorization": "bearer read-token"})
        assert r.status_code == 200


def test_a_refused_write_changes_nothing(secured: Any, seg: str) -> None:
    with secured.client("read-token") as reader:
        before = reader.get(f"/v1/segments/{seg}").json()
        assert reader.post(f"/v1/segments/{seg}:append", content=b"no").status_code == 403
        assert reader.post(f"/v1/segments/{seg}:seal").status_code == 403
        assert reader.delete(f"/v1/segments/{seg}").status_code == 403
        assert reader.get(f"/v1/segments/{seg}").json() == before


def test_auth_comes_before_validation_and_limits(secured: Any) -> None:
    with secured.client() as anonymous:
        assert anonymous.put("/v1/segments/%2e%2e/x").status_code == 401
        assert anonymous.post("/v1/segments/x:append", content=b"x" * (9 << 20)).status_code == 401
        r = anonymous.put(
            "/v1/segments/x", content=b"{bad", headers={"Content-Type": "application/json"}
        )
        assert r.status_code == 401
        # The error never echoes the token it was given.
        r = anonymous.get("/v1/segments", headers={"Authorization": "Bearer s3cr3t-guess"})
        assert "s3cr3t" not in r.text


def test_probes_metrics_and_openapi_are_open(secured: Any) -> None:
    with secured.client() as anonymous:
        for path in ("/healthz", "/readyz", "/metrics", "/openapi.json"):
            assert anonymous.get(path).status_code == 200, path
        spec = anonymous.get("/openapi.json").json()
        assert spec["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"


def test_unknown_roles_are_refused_at_startup() -> None:
    from segmentstore.api.auth import parse_tokens

    with pytest.raises(ValueError, match="unknown role"):
        parse_tokens({"t": "superuser"})
    with pytest.raises(ValueError, match="empty"):
        parse_tokens({"": "read"})
