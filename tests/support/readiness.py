"""Waiting for a served store to be ready: its port answers before its containers recover."""

from __future__ import annotations

import time
from typing import Any

import httpx


def wait_ready(url: str, timeout_s: float = 30.0, **client_options: Any) -> None:
    """Until ``url/readyz`` answers 200; ``client_options`` go to httpx (``verify=``)."""
    deadline = time.monotonic() + timeout_s
    with httpx.Client(base_url=url, timeout=5, **client_options) as http:
        while True:
            try:
                if http.get("/readyz").status_code == 200:
                    return
            except httpx.TransportError:
                pass  # not listening yet
            assert time.monotonic() < deadline, f"{url} was not ready in {timeout_s} s"
            time.sleep(0.01)
