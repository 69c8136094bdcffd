"""S3 for a spawned drill's Tier 2: a moto server in the drill's own process, on a port chosen
once, so that it can be stopped for an outage and started again where the nodes look for it
(moto keeps its objects meanwhile)."""

from __future__ import annotations

from typing import Any

from segmentstore.loopback import free_port

_S3_OPTIONS = {"access_key": "drill", "secret_key": "drill", "region": "us-east-1"}
URI = "s3://segmentstore-drill/tier2"


class MotoTier2:
    def __init__(self) -> None:
        self.port = free_port()
        self._server: Any = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def options(self) -> dict[str, Any]:
        """The Tier 2 options that reach this server."""
        return {"endpoint_url": self.endpoint, "create_bucket": True, **_S3_OPTIONS}

    def start(self) -> None:
        assert self._server is None
        from moto.server import ThreadedMotoServer  # only the s3 drill needs moto

        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self._server.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None
