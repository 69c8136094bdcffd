"""``make mutants``: break the code on purpose, one durability mutant at a time, and show
which check catches each (:mod:`mutant_catalog` lists them).

Each mutant is applied to a scratch copy of the source (the working tree's files, or a git
revision's with ``--rev``), never to the tree itself. The copy gets symbolic links that lay
it out like the installed package (``segmentstore/tier1`` -> ``tier1/``, as setup.py installs
it) and comes first on ``PYTHONPATH``, so the checks, and every process they spawn, run the
mutated code with the project's own virtual environment. Checks run one
after another until one catches the mutant (exit status 1) or the mutant's budget is spent.

    python tests/support/mutants.py [--fast] [--only NAME ...] [--rev REV] [--json FILE]
    python tests/support/mutants.py --unmutated      # the checks against the unmutated copy

Exit status: 0 if every mutant was caught (or, with ``--unmutated``, every check passed).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from mutant_catalog import CATALOG, Check, Mutant

ROOT = Path(__file__).resolve().parents[2]
# What a check prints last, kept to say why it failed (or did not).
_TAIL_CHARS = 1500
_STOP_GRACE_S = 30.0  # for a check out of time to stop what it started


class StaleMutant(Exception):
    """A mutant's old text is not (exactly once) in its file: the code moved on."""


@dataclass
class Outcome:
    mutant: str
    caught: bool
    by: str | None  # the check that caught it
    seconds: float
    note: str  # why not caught, or the check's last words


def scratch_copy(into: Path, rev: str | None) -> Path:
    """The project's source in ``into/src``: the working tree's files (tracked and untracked,
    less what git ignores) or ``rev``'s, laid out to be imported as the package installs."""
    source = into / "src"
    source.mkdir(parents=True)
    if rev is not None:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", "--format=tar", rev],
            check=True,
            capture_output=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(source)], input=archive, check=True)
    else:
        listed = subprocess.run(
            ["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others",
             "--exclude-standard"],
            check=True, capture_output=True,
        ).stdout  # fmt: skip
        for name in filter(None, listed.decode().split("\0")):
            origin = ROOT / name
            if origin.is_file():
                (source / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(origin, source / name)
    # The package as it installs, inside the copy itself (segmentstore/tier1 -> ../tier1,
    # ...): Python finds `segmentstore` in the working directory before anything else, so
    # the copy must be whole there, or the project's editable install would fill the gaps.
    with (source / "pyproject.toml").open("rb") as pyproject:
        folders = tomllib.load(pyproject)["tool"]["segmentstore"]["package-folders"]
    top = source / folders["segmentstore"]
    for name, folder in folders.items():
        if name != "segmentstore":
            (top / name.split(".", 1)[1]).symlink_to(source / folder)
    return source


def apply(mutant: Mutant, source: Path) -> None:
    for replacement in mutant.replacements:
        path = source / replacement.path
        text = path.read_text()
        found = text.count(replacement.old)
        if found != 1:
            raise StaleMutant(
                f"{mutant.name}: {replacement.path} holds its old text {found} times, not once"
            )
        path.write_text(text.replace(replacement.old, replacement.new))


def run_check(check: Check, source: Path, timeout_s: float) -> tuple[int | None, str]:
    """(exit status or None if it ran out of time, its last output). A check that runs out of
    time is stopped as a person would stop it (SIGTERM: a drill then stops the nodes it
    started), and whatever of its process group is left after a grace is killed."""
    env = {**os.environ, "PYTHONPATH": str(source)}
    env.pop("PYTEST_XDIST_WORKER", None)
    env.pop("PYTEST_CURRENT_TEST", None)
    process = subprocess.Popen(
        check.argv,
        cwd=source,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group, which the nodes it starts join
    )
    try:
        output, _ = process.communicate(timeout=max(timeout_s, 1.0))
    except subprocess.TimeoutExpired:
        _signal_group(process.pid, signal.SIGTERM)
        try:
            output, _ = process.communicate(timeout=_STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            _signal_group(process.pid, signal.SIGKILL)
            output, _ = process.communicate()
        _signal_group(process.pid, signal.SIGKILL)  # anything it left behind
        return None, output[-_TAIL_CHARS:]
    except BaseException:  # interrupted (Ctrl-C, a test's timeout): take the check along
        _signal_group(process.pid, signal.SIGKILL)
        process.wait()
        raise
    return process.returncode, output[-_TAIL_CHARS:]


def _signal_group(group: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signum)


def try_mutant(mutant: Mutant, rev: str | None) -> Outcome:
    with tempfile.TemporaryDirectory(prefix=f"mutant-{mutant.name}-") as scratch:
        source = scratch_copy(Path(scratch), rev)
        try:
            apply(mutant, source)
        except StaleMutant as stale:
            return Outcome(mutant.name, False, None, 0.0, f"stale: {stale}")
        started = time.monotonic()
        notes = []
        for check in mutant.checks:
            left = mutant.budget_s - (time.monotonic() - started)
            if left <= 0:
                notes.append(f"no time left for {check.name}")
                break
            status, tail = run_check(check, source, left)
            if status == 1:
                took = time.monotonic() - started
                return Outcome(mutant.name, True, check.name, round(took, 1), _last_line(tail))
            verdict = "ran out of time" if status is None else f"exit {status}"
            notes.append(f"{check.name}: {verdict}")
        took = time.monotonic() - started
        return Outcome(mutant.name, False, None, round(took, 1), "; ".join(notes))


def check_unmutated(mutants: Sequence[Mutant], rev: str | None) -> list[Outcome]:
    """Every check of ``mutants`` once against the unmutated copy: each must pass."""
    checks = {c.name: c for m in mutants for c in m.checks}
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="mutant-none-") as scratch:
        source = scratch_copy(Path(scratch), rev)
        for check in checks.values():
            started = time.monotonic()
            status, tail = run_check(check, source, 900)
            took = round(time.monotonic() - started, 1)
            outcomes.append(Outcome("(none)", status == 0, check.name, took, _last_line(tail)))
    return outcomes


_VERDICT = re.compile(r"\b(lost|problem|passed|failed|error)\b", re.IGNORECASE)


def _last_line(tail: str) -> str:
    """The check's last line that says something (a drill's table ends in borders)."""
    lines = [line.strip(" │┃|") for line in tail.splitlines()]
    said = [line for line in lines if _VERDICT.search(line)] or [line for line in lines if line]
    return " ".join(said[-1].split())[:160] if said else ""


def print_table(outcomes: Sequence[Outcome], unmutated: bool) -> None:
    header = ("check", "passed", "seconds", "last line") if unmutated else (
        "mutant", "caught", "by", "after (s)", "note"
    )  # fmt: skip
    rows = [
        (o.by or "", "yes" if o.caught else "NO", f"{o.seconds:.1f}", o.note)
        if unmutated
        else (o.mutant, "yes" if o.caught else "NO", o.by or "-", f"{o.seconds:.1f}", o.note)
        for o in outcomes
    ]
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header) - 1)]
    for row in [header, *rows]:
        print("  ".join(str(cell).ljust(w) for cell, w in zip(row, widths, strict=False)), end="")
        print("  " + str(row[-1]))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--fast", action="store_true", help="only the mutants marked fast")
    parser.add_argument("--only", nargs="+", default=None, help="only these mutants")
    parser.add_argument("--rev", default=None, help="a git revision instead of the work tree")
    parser.add_argument("--unmutated", action="store_true", help="run the checks unmutated")
    parser.add_argument("--json", type=Path, default=None, help="also write the outcomes here")
    args = parser.parse_args(argv)
    mutants = [m for m in CATALOG if (not args.fast or m.fast)]
    if args.only:
        unknown = set(args.only) - {m.name for m in CATALOG}
        if unknown:
            parser.error(f"unknown mutants {sorted(unknown)}; known: {[m.name for m in CATALOG]}")
        mutants = [m for m in mutants if m.name in args.only]
    if args.unmutated:
        outcomes = check_unmutated(mutants, args.rev)
    else:
        outcomes = []
        for mutant in mutants:
            print(f"mutant {mutant.name}: {mutant.what}", flush=True)
            outcomes.append(try_mutant(mutant, args.rev))
            print(f"  -> {'caught' if outcomes[-1].caught else 'NOT caught'}", flush=True)
    print_table(outcomes, args.unmutated)
    if args.json is not None:
        args.json.write_text(json.dumps([asdict(o) for o in outcomes], indent=1) + "\n")
    return 0 if all(o.caught for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
