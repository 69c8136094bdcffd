"""The package as users install it: one top-level name, every module, a slim client install,
and the container image's install steps.

The wheel is built once per module from the working tree (``pip wheel .``, as a user's ``pip
install .`` would), so what is checked is what ships, not the editable install the tests run on.
No container engine runs here, so the Dockerfile's two install steps (wheels of the project and
its dependencies from the files it copies, then an offline install into a fresh virtual
environment) are run as written, with its paths moved under a temporary directory.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import venv
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from segmentstore.harness.served_store import ServedStore

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
    # The status page's files are package data, served from where they install.
    static = REPO / "api" / "status_page" / "static"
    page = {f"segmentstore/api/status_page/static/{p.name}" for p in static.iterdir()}
    assert page and page <= set(names)


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
    served = ServedStore(tmp_path / "data", tmp_path / "serve.log", environ=os.environ)
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


DOCKERFILE = REPO / "Dockerfile"


def dockerfile_stages() -> list[list[tuple[str, str]]]:
    """The Dockerfile's stages: ``(INSTRUCTION, arguments)`` pairs, continued lines joined."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())
    stages: list[list[tuple[str, str]]] = [[]]
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        instruction, _, arguments = line.strip().partition(" ")
        if instruction == "FROM" and stages[-1] and any(i == "FROM" for i, _ in stages[-1]):
            stages.append([])
        stages[-1].append((instruction, arguments.strip()))
    return stages


def _run_step(command: str, moved: dict[str, Path], cwd: Path, extras: str) -> None:
    for path, local in moved.items():
        command = command.replace(path, str(local))
    # The base image's interpreter is this one (the same minor version as its PYTHON_IMAGE).
    command = re.sub(r"(^|&& )python ", rf"\g<1>{sys.executable} ", command)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        ["bash", "-ec", command],
        cwd=cwd,
        env={**env, "EXTRAS": extras},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, f"{command}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


@pytest.fixture(scope="module")
def image_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The image's file system, as far as the Dockerfile's install steps build it."""
    root = tmp_path_factory.mktemp("image")
    build, final = dockerfile_stages()
    extras = next(a.split("=", 1)[1] for i, a in build if i == "ARG" and a.startswith("EXTRAS="))
    moved = {"/wheels": root / "wheels", "/opt/segmentstore": root / "opt" / "segmentstore"}
    source = root / "src"
    source.mkdir()
    for instruction, arguments in build:
        if instruction == "COPY":
            *copied, _ = arguments.split()
            for name in copied:
                if (REPO / name).is_dir():
                    shutil.copytree(REPO / name, source / name, ignore=_PYCACHE)
                else:
                    shutil.copy(REPO / name, source / name)
        elif instruction == "RUN":
            _run_step(arguments, moved, source, extras)
    (install,) = [a for i, a in final if i == "RUN" and "pip install" in a]
    _run_step(install.replace(_BIND_MOUNT, ""), moved, root, extras)
    return root


_PYCACHE = shutil.ignore_patterns("__pycache__", "*.pyc")
_BIND_MOUNT = "--mount=type=bind,from=build,source=/wheels,target=/wheels"


def test_the_dockerfile_runs_the_service_as_a_non_root_user_with_a_data_volume() -> None:
    build, final = dockerfile_stages()
    first = dict(build)
    assert first["FROM"] == "${PYTHON_IMAGE} AS build"
    base = next(a for i, a in build if i == "ARG" and a.startswith("PYTHON_IMAGE="))
    assert base.startswith("PYTHON_IMAGE=python:") and "-slim" in base
    last = {i: a for i, a in final}
    assert last["USER"] == "10001:10001"
    assert json.loads(last["VOLUME"]) == ["/var/lib/segmentstore"]
    assert json.loads(last["ENTRYPOINT"]) == ["segmentstore"]
    assert json.loads(last["CMD"])[0] == "serve"
    assert any(_BIND_MOUNT in a for i, a in final if i == "RUN")
    ignored = (REPO / ".dockerignore").read_text().split()
    assert {".git", ".venv", "tests"} <= set(ignored)


@pytest.mark.slow
@pytest.mark.integration
def test_the_image_s_install_steps_give_a_working_service(image_root: Path) -> None:
    installed = image_root / "opt" / "segmentstore"
    # The image carries the service, not the development or Spark tools.
    site = next((installed / "lib").glob("python3.*/site-packages"))
    assert (site / "fastapi").is_dir()
    assert not {"pytest", "pyspark", "moto"} & {p.name for p in site.iterdir()}
    # The entry point the image runs, with its CMD's arguments (loopback and a free port here).
    (_, final) = dockerfile_stages()
    cmd = json.loads(dict(final)["CMD"])
    data = image_root / "var" / "lib" / "segmentstore"
    arguments = [
        {"0.0.0.0": "127.0.0.1", "/var/lib/segmentstore": str(data)}.get(a, a) for a in cmd
    ]
    served = ServedStore.launch(
        [str(installed / "bin" / "segmentstore"), *arguments, "--port", "0"],
        {"PATH": f"{installed / 'bin'}:/usr/bin:/bin", "HOME": str(image_root)},
        image_root,
        image_root / "serve.log",
    )
    try:
        served.wait_ready(60)
        probe = "from segmentstore.client import SegmentStoreClient as C\n"
        probe += f"c = C({served.url!r}); c.create_segment('img/0'); c.append('img/0', b'ok')\n"
        probe += "print(bytes(c.read('img/0', 0).data).decode())"
        answer = subprocess.run(
            [str(installed / "bin" / "python"), "-c", probe],
            capture_output=True,
            text=True,
            timeout=60,
            cwd="/",
        )
        assert answer.returncode == 0, answer.stderr
        assert answer.stdout.strip() == "ok"
    finally:
        served.stop()
    assert (data / "tier2").is_dir()
