"""The bare baselines of ``segmentstore bench http``: the store's data routes, and no store.
They are HTTP apps, so they live with the API (FastAPI is the API's alone); the benchmark
(:mod:`segmentstore.bench.http_servers`) only starts them.

Run as ``python -m segmentstore.api.baselines fastapi`` or ``... asgi`` (a child process,
like the store's server), each served as ``segmentstore serve`` serves the store
(:func:`segmentstore.api.server.serve_app`), so that the benchmark's ratios are the cost of the
store behind the same HTTP server:

- ``fastapi``: a FastAPI app whose routes take each body and throw it away (reads answer a
  constant buffer): what the same routes cost through FastAPI alone;
- ``asgi``: the same answers from a plain ASGI function: what the server itself costs per
  request, the floor for any app on it.
"""

from __future__ import annotations

import sys

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

from segmentstore.api.server import serve_app

app = FastAPI()
HEADERS = {"Segment-Start-Offset": "0", "Segment-Length": "0", "Segment-Sealed": "false"}
DATA = bytes(16 << 20)


@app.post("/v1/segments/{name:path}:append")
async def append(name: str, request: Request) -> Response:
    body = await request.body()
    return JSONResponse({"offset": 0, "length": len(body)})


@app.post("/v1/segments/{name:path}:appendEvents")
async def append_events(name: str, request: Request) -> Response:
    body = await request.body()
    return JSONResponse({"offset": 0, "length": len(body), "events": 0})


@app.get("/v1/segments/{name:path}:read")
async def read(name: str, offset: int, max_length: int = 16 << 20) -> Response:
    headers = {"Segment-Read-Offset": str(offset), **HEADERS}
    return Response(DATA[:max_length], media_type="application/octet-stream", headers=headers)


@app.get("/readyz")
async def readyz() -> Response:
    return JSONResponse({"status": "ready"})


_JSON = (b"content-type", b"application/json")
_READ_HEADERS = [(k.lower().encode(), v.encode()) for k, v in HEADERS.items()]


async def asgi_app(scope: Scope, receive: Receive, send: Send) -> None:
    """The same routes as ``app``, as one ASGI function with no framework."""
    if scope["type"] == "lifespan":
        while (message := await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    path: str = scope["path"]
    if scope["method"] == "POST":
        size = 0
        more = True
        while more:
            message = await receive()
            size += len(message.get("body", b""))
            more = message.get("more_body", False)
        events = b',"events":0' if path.endswith(":appendEvents") else b""
        body = b'{"offset":0,"length":%d%s}' % (size, events)
        headers = [_JSON, (b"content-length", b"%d" % len(body))]
    elif path.endswith(":read"):
        query = dict(p.split("=", 1) for p in scope["query_string"].decode().split("&") if p)
        body = DATA[: int(query.get("max_length", len(DATA)))]
        headers = [(b"segment-read-offset", query.get("offset", "0").encode()), *_READ_HEADERS]
        headers += [(b"content-type", b"application/octet-stream")]
        headers += [(b"content-length", b"%d" % len(body))]
    else:
        body = b'{"status":"ready"}'
        headers = [_JSON, (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


if __name__ == "__main__":
    serve_app(asgi_app if sys.argv[1:] == ["asgi"] else app)
