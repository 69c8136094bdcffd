"""The HTTP API of docs/api.md over the embedded store: FastAPI and uvicorn live here only.

:func:`segmentstore.api.app.create_app` builds the app over a store its caller owns;
:func:`segmentstore.api.server.serve` starts the store, then runs it with uvicorn and closes the
store in the lifespan. Every request comes in through one gate (:mod:`segmentstore.api.gate`)
and is served by its route's one handler.
May import: ``store``, ``containers``, ``cluster``, ``contracts`` and ``vocabulary``.
"""

from segmentstore.api.app import create_app

__all__ = ["create_app"]
