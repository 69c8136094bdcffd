"""The client's public surface, and what importing it costs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import segmentstore.client

REPO = Path(__file__).resolve().parents[2]


def test_public_names() -> None:
    assert segmentstore.client.__all__ == [
        "AsyncSegmentStoreClient",
        "BlockingEventWriter",
        "ContainerState",
        "EventAck",
        "EventReader",
        "EventWriter",
        "EventsReadResult",
        "ReadResult",
        "RetryPolicy",
        "SegmentPage",
        "SegmentStoreClient",
        "UnknownOffsetError",
        "WriterClosedError",
    ]


def test_importing_the_client_loads_no_server_or_storage_backend() -> None:
    heavy = ["fastapi", "starlette", "uvicorn", "pyarrow", "boto3", "botocore", "lmdb"]
    heavy += ["aiohttp", "nats"]  # the asyncio client speaks HTTP/1.1 itself
    probe = (
        "import sys, segmentstore.client\n"
        f"print(','.join(m for m in {heavy!r} if m in sys.modules))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=REPO,
        env={"PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert loaded == ""
