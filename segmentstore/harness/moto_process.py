"""The process of a spawned drill's S3 (:class:`~segmentstore.harness.moto_s3.MotoTier2`): a
moto server that starts and stops on command, keeping its objects in this process meanwhile.

Commands are lines on stdin, ``start`` and ``stop``; each is answered with the same word on
stdout once done. The process ends when its stdin does (its parent is gone, or closed it).
"""

from __future__ import annotations

import logging
import sys
from typing import Any


def main() -> None:
    from moto.server import ThreadedMotoServer

    # A line per request on stderr otherwise, in the middle of the drill's own output.
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    port = int(sys.argv[1])
    server: Any = None
    for line in sys.stdin:
        command = line.strip()
        if command == "start" and server is None:
            server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
            server.start()
        elif command == "stop" and server is not None:
            server.stop()
            server = None
        elif command not in ("start", "stop"):
            raise SystemExit(f"unknown command {command!r}")
        print(command, flush=True)
    if server is not None:
        server.stop()


if __name__ == "__main__":
    main()
