"""Checking, before a job's first scan, that the executors' Python can run the data source.

On a cluster every executor starts its own Python (``spark.pyspark.python``, else
``PYSPARK_PYTHON``, else ``python3`` from its PATH) and unpickles the data source there; one
that lacks this project or pyarrow fails deep inside the first task with a
``ModuleNotFoundError`` wrapped in a Java stack trace. :func:`check_executor_python` runs a tiny
probe on the executors first and turns that into an error that says what to install where.

The probe is compiled from source here, outside any module, so that Spark's pickler ships it
by value: a probe defined in this module would itself need the project on the executor to be
unpickled, and would fail exactly as the scan does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from pyspark.sql import SparkSession

from segmentstore.jobs.errors import ExecutorPythonError

REQUIRED = ("pyarrow", "segmentstore.jobs", "segmentstore.tier2")

_PROBE_SOURCE = """
def probe(_rows):
    import importlib.util
    import socket
    import sys

    missing = []
    for module in REQUIRED:
        try:
            found = importlib.util.find_spec(module) is not None
        except ImportError:  # a parent package is missing
            found = False
        if not found:
            missing.append(module)
    version = ".".join(str(part) for part in sys.version_info[:3])
    yield (sys.executable, socket.gethostname(), version, tuple(missing))
"""


def _probe() -> Callable[[Iterable[Any]], Iterator[tuple[str, str, str, tuple[str, ...]]]]:
    namespace: dict[str, Any] = {"__name__": "segmentstore_executor_probe", "REQUIRED": REQUIRED}
    exec(compile(_PROBE_SOURCE, "<executor probe>", "exec"), namespace)
    probe: Callable[[Iterable[Any]], Iterator[tuple[str, str, str, tuple[str, ...]]]]
    probe = namespace["probe"]
    return probe


def check_executor_python(spark: SparkSession) -> None:
    """Raise :class:`ExecutorPythonError` unless every probed executor's Python can import
    pyarrow and this project's jobs; one task per default slot, so every executor is likely
    probed (Spark does not promise where tasks run)."""
    context = spark.sparkContext
    slots = max(1, context.defaultParallelism)
    python = context.getConf().get("spark.pyspark.python") or "python3 (from PATH)"
    try:
        found = context.parallelize(range(slots), slots).mapPartitions(_probe()).collect()
    except Exception as error:  # Spark's, carrying the Python worker's own failure
        first = str(error).strip().splitlines()[0] if str(error).strip() else repr(error)
        raise ExecutorPythonError(
            f"the Spark executors could not run Python {python}: {first}"
        ) from error
    for executable, host, version, missing in sorted(set(found)):
        if missing:
            raise ExecutorPythonError(
                f"the Python of the Spark executors ({executable}, Python {version}, on "
                f"{host}) cannot import {', '.join(missing)}: install this project with its "
                "Spark extra into it (pip install 'segmentstore[spark]'), or point "
                "spark.pyspark.python (segmentstore spark --python, or PYSPARK_PYTHON) at a "
                "Python on every worker that has it"
            )
