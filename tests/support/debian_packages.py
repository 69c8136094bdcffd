"""Tools from Debian's packages that some tests drive (promtool, prometheus, chromium): found
on the ``PATH``, or installed with ``apt-get`` when the tests run as root, or else the test
skips and says why.

One attempt per package and run: a failed install is remembered, so that a machine without the
package skips every test that needs it quickly instead of retrying for each.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from one_at_a_time import one_at_a_time

_failed: dict[str, str] = {}  # package -> why it could not be installed
_updated = False


def require(binary: str, package: str) -> str:
    """The path of ``binary``, installing Debian's ``package`` first when it is missing;
    skips the calling test with the reason when it cannot be had."""
    found = shutil.which(binary)
    if found is not None:
        return found
    why = _failed.get(package) or _install_once(binary, package)
    if why is None:
        found = shutil.which(binary)
        if found is not None:
            return found
        why = f"apt-get installed {package}, but it has no {binary} on the PATH"
        _failed[package] = why
    pytest.skip(f"{binary} is needed: {why}")


def _install_once(binary: str, package: str) -> str | None:
    """Installs ``package`` unless another test process did meanwhile: the suite's processes
    (pytest-xdist's workers) take turns, as dpkg lets one install at a time."""
    with one_at_a_time("apt"):
        return None if shutil.which(binary) is not None else _install(package)


def _install(package: str) -> str | None:
    """Installs ``package``; None once done, else why not."""
    global _updated
    if shutil.which("apt-get") is None:
        return _remember(package, "this is not a Debian system (no apt-get)")
    if os.geteuid() != 0:
        return _remember(package, f"not root, so apt-get cannot install {package}")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    steps = [["apt-get", "install", "-y", "--no-install-recommends", package]]
    if not _updated:
        steps.insert(0, ["apt-get", "update"])
    for step in steps:
        done = subprocess.run(step, env=env, capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            return _remember(package, f"{' '.join(step)} failed: {' / '.join(tail)}")
        _updated = _updated or step[1] == "update"
    return None


def _remember(package: str, why: str) -> str:
    _failed[package] = why
    return why
