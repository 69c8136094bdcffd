"""The ``segmentstore tier2`` command line as the tests run it (a process of its own, as a user
runs it), and waiting for Tier 2 to catch up. Shared by the local and the S3 Tier 2 tests; the
``tests/support`` folder is on pytest's ``pythonpath``."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


async def run_tier2_cli(
    *args: str, options: Mapping[str, object] | None = None
) -> tuple[int, bytes, str]:
    """``segmentstore tier2 ARGS [--option K=V ...]``: exit code, stdout, stderr."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "segmentstore.cli",
        "tier2",
        *args,
        *(f"--option={key}={value}" for key, value in (options or {}).items()),
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode is not None
    return process.returncode, stdout, stderr.decode(errors="replace")


def parse_ls(text: str) -> dict[str, tuple[int, int, bool]]:
    """``tier2 ls`` output: name -> (start offset, storage length, sealed)."""
    lines = text.splitlines()
    assert lines and lines[0].split() == ["start_offset", "storage_length", "sealed", "name"]
    listed = {}
    for line in lines[1:]:
        start, length, sealed, name = line.split(maxsplit=3)
        assert sealed in ("true", "false"), line
        listed[name] = (int(start), int(length), sealed == "true")
    return listed


async def wait_until(condition: Callable[[], Awaitable[bool]], timeout_s: float) -> bool:
    """Whether ``condition`` became true within ``timeout_s`` (polled)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if await condition():
            return True
        await asyncio.sleep(0.01)
    return await condition()
