"""The bare baseline of ``segmentstore bench http``: the store's data routes, and no store.

Run as ``python -m segmentstore.api.bench_baseline`` (a child process, like the store's server)
with the same uvicorn settings as ``segmentstore serve``, so that the benchmark's ratio store/bare
is the cost of the store behind the same HTTP stack.
"""

from __future__ import annotations

import uvicorn
import uvloop
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from segmentstore.api.server import server_config

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


if __name__ == "__main__":
    uvloop.run(uvicorn.Server(server_config(app, "127.0.0.1", 0, log_level="info")).serve())
