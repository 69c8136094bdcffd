"""The HTTP API of docs/api.md over the embedded store: FastAPI and uvicorn live here only.

:func:`segmentstore.api.app.create_app` builds the app over a store its caller owns;
:func:`segmentstore.api.server.serve` starts the store, then runs it with uvicorn and closes the
store in the lifespan.
"""

from segmentstore.api.app import create_app

__all__ = ["create_app"]
