"""Runs a Markdown page's blocks as one script, the way a user pastes them into a shell.

The blocks (doc_blocks.py) go in order into one bash script; a Python block becomes
``python3 - <<'…'`` so that it runs with the ``python3`` on PATH and the shell keeps its state
(variables, background jobs) across blocks. The script runs:

- from ``workdir``, a fresh directory outside the clone (``TMPDIR`` points inside it, so
  ``mktemp -d`` does too);
- with the project's virtual environment's ``bin`` first on PATH and nothing else activated
  (no ``VIRTUAL_ENV``, no ``SEGMENTSTORE_*`` variable);
- in a network namespace of its own (``unshare --net``, loopback only), so the fixed ports the
  docs name (9090, 4221, ...) are free by construction and never meet another test's;
- in a process group of its own: whatever the page leaves running is reported, then killed by
  that group's id.

A command that fails (a non-zero status where the shell would not stop to test it) is recorded
with the block it belongs to; ``wait`` is the exception, since a server stopped by SIGTERM ends
with 143 by design.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from doc_blocks import Block

VENV_BIN = Path(sys.executable).parent
BLOCK_TAG = "##docs-test## block "
FAILED_TAG = "##docs-test## failed "
_PY_END = "__DOCS_TEST_PYTHON__"

# Recorded, not fatal: a user sees the error and reads on, and so does this script, so one run
# reports every failing command of the page.
_PRELUDE = (
    'trap \'status=$?; case "$BASH_COMMAND" in wait|wait\\ *) ;; '
    f'*) echo "{FAILED_TAG}$status: $BASH_COMMAND" >&2 ;; esac\' ERR\n'
)


@dataclass
class PageRun:
    """What running a page gave: its output, the failures (each with the block it came from),
    and the processes it left behind."""

    returncode: int
    stdout: str
    stderr: str
    failures: list[str] = field(default_factory=list)
    leftovers: list[str] = field(default_factory=list)
    timed_out: bool = False

    def report(self) -> str:
        return (
            f"failures: {self.failures}\nleft running: {self.leftovers}\n"
            f"timed out: {self.timed_out}\n--- stdout\n{self.stdout[-6000:]}\n"
            f"--- stderr\n{self.stderr[-6000:]}"
        )


def page_script(page_blocks: list[Block]) -> str:
    """The bash script that runs ``page_blocks`` (only those without a marker) in order."""
    parts = [_PRELUDE]
    for block in page_blocks:
        if block.marker is not None:
            continue
        tag = f"{BLOCK_TAG}{block.where}"
        parts.append(f"printf '\\n%s\\n' '{tag}'; printf '\\n%s\\n' '{tag}' >&2\n")
        if block.lang == "sh":
            parts.append(block.text)
        else:
            assert _PY_END not in block.text
            parts.append(f"python3 - <<'{_PY_END}'\n{block.text}{_PY_END}\n")
    return "".join(parts)


def user_environment(workdir: Path) -> dict[str, str]:
    """A user's shell: the venv's ``bin`` on PATH, nothing of the project configured."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SEGMENTSTORE_", "PYTEST_", "VIRTUAL_ENV", "PYTHON", "COV_"))
    }
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}"
    env["TMPDIR"] = str(workdir / "tmp")
    env["HOME"] = str(workdir / "home")
    return env


def run_page(
    page_blocks: list[Block], workdir: Path, timeout_s: float, cwd: Path | None = None
) -> PageRun:
    """Run the page's blocks from ``cwd`` (default ``workdir``), keeping the script, its output,
    ``TMPDIR`` and ``HOME`` in ``workdir`` (see the module docstring)."""
    (workdir / "tmp").mkdir(parents=True, exist_ok=True)
    (workdir / "home").mkdir(parents=True, exist_ok=True)
    script = workdir / "page.sh"
    script.write_text(page_script(page_blocks))
    command = ["unshare", "--net", "bash", "-c", 'ip link set lo up && exec bash "$0"', str(script)]
    # Files, not pipes: a process the page leaves running would hold a pipe open.
    with (workdir / "stdout").open("w") as out, (workdir / "stderr").open("w") as err:
        process = subprocess.Popen(
            command,
            cwd=cwd or workdir,
            env=user_environment(workdir),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
    group = process.pid
    timed_out = False
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(group)
        process.wait()
    leftovers = _group_members(group)
    if leftovers:
        _kill_group(group)
    stdout = (workdir / "stdout").read_text(errors="replace")
    stderr = (workdir / "stderr").read_text(errors="replace")
    run = PageRun(process.returncode, stdout, stderr, leftovers=leftovers, timed_out=timed_out)
    block = "(before the first block)"
    for line in stderr.splitlines():
        if line.startswith(BLOCK_TAG):
            block = line[len(BLOCK_TAG) :]
        elif line.startswith(FAILED_TAG):
            run.failures.append(f"{block}: exit {line[len(FAILED_TAG) :]}")
    return run


def syntax_error(block: Block) -> str | None:
    """Why ``block`` is not valid bash or Python, or ``None``."""
    if block.lang == "python":
        try:
            compile(block.text, block.where, "exec")
        except SyntaxError as error:
            return f"{block.where}: {error}"
        return None
    checked = subprocess.run(
        ["bash", "-n"], input=block.text, capture_output=True, text=True, check=False
    )
    return f"{block.where}: {checked.stderr.strip()}" if checked.returncode else None


def _group_members(group: int) -> list[str]:
    """The processes still in process group ``group`` (their pid and command line)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        except OSError:
            continue  # gone meanwhile
        # the fields after the command name, which may itself hold spaces and brackets
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] != "Z" and int(fields[2]) == group:
            members.append(f"{entry.name} {cmdline}")
    return members


def _kill_group(group: int) -> None:
    try:
        os.killpg(group, signal.SIGKILL)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 10
    while _group_members(group) and time.monotonic() < deadline:
        time.sleep(0.1)
