"""A request cut off because the server is stopping is answered ``503``, not ``500``.

When uvicorn's graceful shutdown runs out of time it cancels the requests still running (a tail
read that waits, a request whose body never came) and answers ``500`` for any that sent
nothing yet. Nothing went wrong with such a request: this node is going away. The gate
(:mod:`segmentstore.api.gate`) answers it ``503 container_unavailable`` with ``Retry-After``
instead, so a client sends it again, to another node of a cluster or to this one once it is
back.
"""

from __future__ import annotations

from fastapi.responses import JSONResponse

from segmentstore.api.errors import error_json
from segmentstore.contracts.errors import ContainerUnavailableError

_UNAVAILABLE = ContainerUnavailableError


def stopping_answer() -> JSONResponse:
    """The answer to a request that the stopping server cut off before it answered."""
    message = "this node is stopping: send the request again"
    return error_json(_UNAVAILABLE.status, _UNAVAILABLE.code, message)
