"""The installed version (``segmentstore --version``, the metric ``segmentstore_build_info``)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version


def _installed_version() -> str:
    try:
        return version("segmentstore")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "0+unknown"


VERSION = _installed_version()
