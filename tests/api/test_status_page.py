"""The status page's files as the node serves them (the page itself runs in a real browser in
tests/operations): found from ``/``, served whole with a policy that lets it load and fetch
from its own node only, not behind auth (they hold no data), and naming nothing elsewhere."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx

STATIC = Path(__file__).resolve().parents[2] / "api" / "status_page" / "static"


def test_the_root_and_ui_lead_to_the_page(http: httpx.Client) -> None:
    for path in ("/", "/ui"):
        answer = http.get(path)
        assert answer.status_code == 307
        assert answer.headers["Location"] == "ui/"
        assert http.get(path, follow_redirects=True).url.path == "/ui/"


def test_the_page_its_script_and_style_are_served_as_installed(http: httpx.Client) -> None:
    for name, media_type in [
        ("", "text/html"),
        ("status.js", "text/javascript"),
        ("status.css", "text/css"),
        ("favicon.svg", "image/svg+xml"),
    ]:
        answer = http.get(f"/ui/{name}")
        assert answer.status_code == 200
        assert answer.headers["Content-Type"].startswith(media_type)
        assert answer.content == (STATIC / (name or "index.html")).read_bytes()
        policy = answer.headers["Content-Security-Policy"]
        assert "default-src 'none'" in policy and "connect-src 'self'" in policy
        assert answer.headers["X-Content-Type-Options"] == "nosniff"


def test_the_page_names_nothing_outside_its_node() -> None:
    for path in STATIC.iterdir():
        text = path.read_text()
        # (an SVG names its XML namespace, which is never fetched)
        text = text.replace('xmlns="http://www.w3.org/2000/svg"', "")
        assert not re.search(r"(?i)\bhttps?:|//[a-z0-9.-]+\.[a-z]{2,}/", text), path.name
    page = (STATIC / "index.html").read_text()
    assert re.findall(r'(?:src|href)="([^"]+)"', page) == ["favicon.svg", "status.css", "status.js"]


def test_the_files_are_not_behind_auth_but_the_data_is(secured: Any) -> None:
    with httpx.Client(base_url=secured.url) as anonymous:
        assert anonymous.get("/ui/").status_code == 200
        assert anonymous.get("/ui/status.js").status_code == 200
        assert anonymous.get("/v1/cluster").status_code == 401
        assert anonymous.get("/v1/containers").status_code == 401
