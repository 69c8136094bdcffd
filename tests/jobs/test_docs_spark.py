"""Every Spark code block of the README and docs/ (those marked ``<!-- docs-test: spark -->``),
run as written, extracted from the pages, from a directory outside the repository, on
``local[2]`` (and on a standalone cluster: test_docs_spark_standalone.py, a module of its own
so that the two, the longest Spark tests, can run side by side). A block that only repeats
commands another block runs is run once.

As a user runs them: without the virtual environment on PATH (``python3`` there is the
system's, so executors that fell back to it would fail), Python blocks run by the
environment's Python by path, shell blocks with a PATH whose only project entry is the
``segmentstore`` command. The data the pages describe is prepared first: a real
``segmentstore serve`` node takes keyed events for ``scope/stream/0`` and ``scope/stream/1``
over HTTP and moves them to ``./data/tier2``.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from doc_blocks import Block, blocks

from segmentstore.harness.served_store import ServedStore
from segmentstore.loopback import free_port

from .conftest import frame, wait_until

pytestmark = [
    pytest.mark.spark,
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.standalone,
]

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SPARK_BLOCKS = [b for page in PAGES for b in blocks(page) if b.marker == "spark"]
VENV_BIN = Path(sys.executable).parent
BLOCK_TIMEOUT_S = 600
SEGMENTS = ("scope/stream/0", "scope/stream/1")


@dataclass(frozen=True)
class Prepared:
    data: Path  # a node's data directory, its Tier 2 holding the events
    events: dict[str, int]  # per segment


def keyed(key: bytes, value: bytes) -> bytes:
    return struct.pack(">H", len(key)) + key + value


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Prepared:
    root = tmp_path_factory.mktemp("docs-node")
    settings = {"SEGMENTSTORE_STORAGE_WRITER__FLUSH_INTERVAL_MS": "200"}
    server = ServedStore(root / "data", root / "serve.log", settings, environ=os.environ)
    rng = random.Random(61)
    events = {}
    try:
        server.wait_ready(120)
        with httpx.Client(base_url=server.url, timeout=30) as http:
            for name in SEGMENTS:
                assert http.put(f"/v1/segments/{name}").status_code == 201
                count = 0
                for _ in range(20):
                    payloads = [
                        keyed(f"user-{rng.randint(0, 9)}".encode(), rng.randbytes(size))
                        for size in (rng.randint(0, 90) for _ in range(rng.randint(1, 6)))
                    ]
                    body = frame(payloads)
                    response = http.post(f"/v1/segments/{name}:appendEvents", content=body)
                    assert response.is_success, response.text
                    count += len(payloads)
                events[name] = count

            def flushed() -> bool:
                infos = [http.get(f"/v1/segments/{n}").json() for n in SEGMENTS]
                return all(i["storage_length"] == i["length"] for i in infos)

            wait_until(flushed, timeout_s=60)
    finally:
        server.stop()
    return Prepared(root / "data", events)


def user_environment(bin_dir: Path, master: str | None) -> dict[str, str]:
    """The environment of a user who has not activated the virtual environment: the
    ``segmentstore`` command alone on PATH, nothing that names a Python for Spark."""
    bin_dir.mkdir()
    (bin_dir / "segmentstore").symlink_to(VENV_BIN / "segmentstore")
    path = [p for p in os.environ["PATH"].split(os.pathsep) if Path(p).resolve() != VENV_BIN]
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("SEGMENTSTORE_", "PYSPARK", "SPARK_", "VIRTUAL_ENV"))
        and key not in ("MASTER", "PYTHONPATH", "PYTHONHOME")
    }
    env["PATH"] = os.pathsep.join([str(bin_dir), *path])
    env["SPARK_MASTER_PORT"] = str(free_port())  # the cluster block's own Master
    if master is not None:
        env["MASTER"] = master
    system_python = shutil.which("python3", path=env["PATH"])
    assert system_python is None or Path(system_python).resolve() != Path(sys.executable).resolve()
    return env


def run_block(block: Block, where: Path, env: dict[str, str], index: int) -> str:
    """Run ``block`` in ``where``; its output. A shell block's stray processes are killed."""
    if block.lang == "python":
        script = where / f"example_{index}.py"
        script.write_text(block.text)
        command = [sys.executable, script.name]
    else:
        assert block.lang == "sh", block
        command = ["bash", "-e", "-c", block.text]
    process = subprocess.Popen(
        command,
        cwd=where,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=BLOCK_TIMEOUT_S)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # what the block left running, if anything
        process.wait()
    assert process.returncode == 0, f"{block} failed:\n{block.text}\n{output[-6000:]}"
    return output


def test_the_spark_pages_are_covered() -> None:
    spark_page = [b for b in blocks(REPO / "docs" / "spark.md") if b.lang in ("python", "sh")]
    assert spark_page and all(b.marker == "spark" for b in spark_page)
    assert {b.lang for b in SPARK_BLOCKS} == {"python", "sh"}
    assert any(b.path.name == "README.md" for b in SPARK_BLOCKS)


def _commands(block: Block) -> set[str]:
    return {line.strip() for line in block.text.splitlines() if line.strip()}


# A block whose every command another block also runs, in the same directory, proves nothing
# more by running again (the README's job is the first of docs/spark.md's three); the
# standalone module still runs it on a cluster.
ON_LOCAL_SPARK = [
    b
    for b in SPARK_BLOCKS
    if not any(o is not b and _commands(b) < _commands(o) for o in SPARK_BLOCKS)
]


def test_a_block_left_out_of_the_local_run_is_run_by_another() -> None:
    left_out = [b for b in SPARK_BLOCKS if b not in ON_LOCAL_SPARK]
    assert [b.path.name for b in left_out] == ["README.md"]
    assert all(any(_commands(b) < _commands(o) for o in ON_LOCAL_SPARK) for b in left_out)


@pytest.mark.timeout(1200)
def test_every_spark_block_runs_as_written_on_local_spark(
    prepared: Prepared, tmp_path: Path
) -> None:
    workdir = run_every_block(ON_LOCAL_SPARK, None, prepared, tmp_path)
    assert (workdir / "events-parquet").is_dir() and (workdir / "compacted").is_dir()


def run_every_block(
    spark_blocks: list[Block], master: str | None, prepared: Prepared, tmp_path: Path
) -> Path:
    """Run the blocks in order in a fresh directory (``MASTER`` set to ``master`` if any),
    check what they print against the prepared events, and return the directory."""
    workdir = tmp_path / "work"
    workdir.mkdir()
    assert REPO not in workdir.resolve().parents
    shutil.copytree(prepared.data, workdir / "data")
    total = sum(prepared.events.values())
    env = user_environment(tmp_path / "bin", master)
    outputs = [run_block(block, workdir, env, i) for i, block in enumerate(spark_blocks)]
    everything = "\n".join(outputs)
    assert f"{total} events\n" in everything
    assert f"{prepared.events['scope/stream/0']} keyed events in scope/stream/0" in everything
    assert f"{total} events streamed so far" in everything
    for name, count in prepared.events.items():
        assert any(name in line and f" {count} " in f" {line} " for line in everything.splitlines())
    if master is not None:
        assert "Spark 4" in everything and master in everything
    return workdir
