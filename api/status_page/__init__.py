"""The status page every node serves at ``/ui/`` (``/`` and ``/ui`` lead there): the cluster
map, the containers, the segments with a live tail, and the node's rates, for a person with a
browser.

It is a few static files (``static/``: the HTML, one script, one style sheet, an icon),
installed with the package and read once. The page holds no data of its own: its script reads
the same public API a client does (``GET /v1/cluster``, ``/v1/containers``, ``/v1/segments``, a
segment's info and ``:read``) and ``/metrics``, with the token the person gives, so it follows
the API's auth rules exactly and keeps working whatever the node does inside. The files
themselves are not behind auth (they say nothing about the store). A Content-Security-Policy
lets the page load and fetch from its own node only.
"""

from __future__ import annotations

from importlib.resources import files

from fastapi import APIRouter
from fastapi.responses import RedirectResponse, Response

PAGE_PATH = "/ui/"
_FILES = {
    "index.html": "text/html; charset=utf-8",
    "status.js": "text/javascript; charset=utf-8",
    "status.css": "text/css; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}
_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self';"
        " img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    # A new release's page and script arrive together, never one cached with the other new.
    "Cache-Control": "no-cache",
}


def _load(name: str) -> bytes:
    return files(__package__).joinpath("static", name).read_bytes()


def status_page_router() -> APIRouter:
    router = APIRouter(include_in_schema=False)
    loaded = {name: (_load(name), media_type) for name, media_type in _FILES.items()}

    def serve(name: str) -> Response:
        body, media_type = loaded[name]
        return Response(body, media_type=media_type, headers=_HEADERS)

    @router.get("/")
    @router.get("/ui")
    async def to_the_page() -> Response:
        # Relative ("/" and "/ui" both lead to "/ui/"), so that the page is found behind a
        # proxy that serves the node under a path of its own.
        return RedirectResponse("ui/", status_code=307)

    @router.get(PAGE_PATH)
    async def page() -> Response:
        return serve("index.html")

    @router.get(PAGE_PATH + "status.js")
    async def script() -> Response:
        return serve("status.js")

    @router.get(PAGE_PATH + "status.css")
    async def style() -> Response:
        return serve("status.css")

    @router.get(PAGE_PATH + "favicon.svg")
    async def icon() -> Response:
        return serve("favicon.svg")

    return router
