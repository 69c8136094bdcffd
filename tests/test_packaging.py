"""The package as users install it: one top-level name, every module, and a slim client install.

The wheel is built once per module from the working tree (``pip wheel .``, as a user's ``pip
install .`` would), so what is checked is what ships, not the editable install the tests run on.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import venv
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from served_store import ServedStore

REPO = Path(__file__).resolve().parent.parent
# repository folder -> where it lands in the installed package (setup.py)
INSTALLED_AS = {
    "segmentstore": "segmentstore",
    "tier1": "segmentstore/tier1",
    "tier2": "segmentstore/tier2",
    "cache": "segmentstore/cache",
    "api": "segmentstore/api",
    "jobs": "segmentstore/jobs",
}
SERVER_ONLY = ["fastapi", "starlette", "uvicorn", "pyarrow", "boto3", "botocore", "pydantic"]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(out), str(REPO)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (built,) = out.glob("segmentstore-*.whl")
    return built


def test_the_wheel_installs_one_top_level_package_with_every_module(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert {name.split("/")[0] for name in names} == {
        "segmentstore",
        wheel.name.split("-py3")[0] + ".dist-info",
    }
    expected = {
        f"{INSTALLED_AS[folder]}/{path.relative_to(REPO / folder).as_posix()}"
        for folder in INSTALLED_AS
        for path in (REPO / folder).rglob("*.py")
    }
    assert expected - set(names) == set()
    assert "segmentstore/py.typed" in names


@pytest.fixture(scope="module")
def slim_python(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with the wheel and no extra: the client-only install."""
    home = tmp_path_factory.mktemp("slim-venv")
    venv.create(home, with_pip=True)
    python = home / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", str(wheel)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    return python


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServedStore]:
    served = ServedStore(tmp_path / "data", tmp_path / "serve.log")
    try:
        served.wait_ready(60)
        yield served
    finally:
        served.stop()


@pytest.mark.slow
@pytest.mark.integration
def test_the_client_only_install_talks_to_a_server(slim_python: Path, server: ServedStore) -> None:
    probe = textwrap.dedent(
        f"""
        import asyncio, importlib.util, sys
        from segmentstore.client import (
            AsyncSegmentStoreClient, EventReader, EventWriter, SegmentStoreClient
        )

        with SegmentStoreClient({server.url!r}) as client:
            client.create_segment("slim/0")
            client.append("slim/0", b"hello ")
            client.append("slim/0", b"world")
            print(bytes(client.read("slim/0", 0).data).decode())

        async def events():
            async with AsyncSegmentStoreClient({server.url!r}) as client:
                await client.create_segment("slim/events")
                async with EventWriter(client) as writer:
                    await asyncio.gather(*(writer.write("slim/events", b"e") for _ in range(3)))
                reader = EventReader(client, "slim/events", follow=False)
                return [offset async for offset, _ in reader]

        print(asyncio.run(events()))
        print(sorted(m for m in {SERVER_ONLY!r} if importlib.util.find_spec(m)))
        """
    )
    answer = subprocess.run(
        [str(slim_python), "-c", probe], capture_output=True, text=True, timeout=60, cwd="/"
    )
    assert answer.returncode == 0, answer.stderr
    assert answer.stdout.splitlines() == ["hello world", "[0, 9, 18]", "[]"]


@pytest.mark.slow
@pytest.mark.integration
def test_the_client_only_install_says_what_serving_needs(slim_python: Path) -> None:
    answer = subprocess.run(
        [str(slim_python.parent / "segmentstore"), "serve"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
    )
    assert answer.returncode == 2
    assert "pip install 'segmentstore[server]'" in answer.stderr
