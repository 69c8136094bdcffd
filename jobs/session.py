"""The Spark session of ``segmentstore spark`` and ``segmentstore bench spark``, and what
:func:`segmentstore.jobs.register` sets on any session.

Local Spark (``local[2]``) by default; any master URL for a cluster. The executors start their
Python workers with the driver's own interpreter (the one that has this project and pyarrow)
unless ``spark.pyspark.python`` or ``PYSPARK_PYTHON`` names another, which must then exist at
the same path on every worker machine. On a cluster the session first checks that Python
(:mod:`segmentstore.jobs.executor_python`), so a worker without the project fails with a message
that says what to install instead of a ``ModuleNotFoundError`` inside a Java stack trace. On a
local master, or a standalone master on this machine's loopback address, the driver binds to
127.0.0.1 (where the executors can reach it) and the web UI stays off.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from pyspark import SparkContext
from pyspark.sql import SparkSession

from segmentstore.jobs import register
from segmentstore.jobs.executor_python import check_executor_python

DEFAULT_MASTER = "local[2]"
PYTHON_SETTING = "spark.pyspark.python"
HIDE_TRACEBACK_SETTING = "spark.sql.execution.pyspark.udf.hideTraceback.enabled"
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}
_PYSPARK_DEFAULT_PYTHON = "python3"  # what PySpark runs when nothing names a Python


def executors_python(context: SparkContext) -> str:
    """The executors' Python: ``spark.pyspark.python``, else the one PySpark took from
    ``PYSPARK_PYTHON`` (or the program set on the context), else this driver's own
    interpreter. PySpark's fallback, ``python3`` from each worker's PATH, counts as none named:
    that is rarely a Python with this project (``PYSPARK_PYTHON=python3`` therefore means this
    interpreter too; name a path to mean another)."""
    configured = context.getConf().get(PYTHON_SETTING)
    if configured:
        return configured
    chosen = context.pythonExec
    return sys.executable if chosen == _PYSPARK_DEFAULT_PYTHON else chosen


def prepare(spark: SparkSession) -> None:
    """What :func:`segmentstore.jobs.register` sets before registering the data source."""
    context = spark.sparkContext
    # A Python driver ships its choice of Python with every Python function and data source
    # it registers (SparkContext.pythonExec, from $PYSPARK_PYTHON when the context starts);
    # the spark.pyspark.python setting alone is read only by spark-submit.
    context.pythonExec = executors_python(context)
    if spark.conf.get(HIDE_TRACEBACK_SETTING, None) is None:
        # A failure in a Python worker reaches the driver as its last line, the project's
        # error, not as the worker's traceback (the data source logs that at debug level).
        spark.conf.set(HIDE_TRACEBACK_SETTING, "true")


def _quiet_task_failures(spark: SparkSession) -> None:
    """A failed task reaches the driver as the exception of the action that ran it (one line of
    the project's error). The executor's and the scheduler's log records of it repeat it with
    Java stack traces, over a hundred lines on the driver's console for one failure (a local
    Spark runs its executor in the driver): those go, but the scheduler's one-line ``aborting
    job``. The tasks still running when the job aborts are killed, and one killed while it
    writes a shuffle file warns, with a stack trace, that the file's channel was closed under it
    and that its temporary file is gone: those go too. Executors on other machines log as their
    cluster says."""
    jvm: Any = getattr(spark.sparkContext, "_jvm")  # noqa: B009 (py4j's untyped gateway)
    log4j = jvm.org.apache.logging.log4j
    for logger, level in (
        ("org.apache.spark.executor.Executor", log4j.Level.OFF),
        ("org.apache.spark.scheduler.TaskSetManager", log4j.Level.ERROR),
        ("org.sparkproject.guava.io.Closeables", log4j.Level.ERROR),
        ("org.apache.spark.storage.DiskBlockObjectWriter", log4j.Level.ERROR),
    ):
        log4j.core.config.Configurator.setLevel(logger, level)


def is_loopback_master(master: str) -> bool:
    """``spark://127.0.0.1:7077`` (or localhost, or several such hosts): a standalone master
    on this machine's loopback address, whose executors reach the driver only there too."""
    if not master.startswith("spark://"):
        return False
    hosts = master[len("spark://") :].split(",")
    return all(urlsplit(f"//{host}").hostname in _LOOPBACK for host in hosts)


def start_session(
    master: str = DEFAULT_MASTER,
    app_name: str = "segmentstore",
    conf: Mapping[str, str] | None = None,
    *,
    python: str | None = None,
    check_executors: bool | None = None,
) -> SparkSession:
    """A session with the ``segmentstore`` data source registered.

    ``python``: the executors' Python (``spark.pyspark.python``); None:
    :func:`executors_python`. ``check_executors``: probe that Python before returning (default:
    on any master but a local one).
    """
    builder = SparkSession.builder.master(master).appName(app_name)
    local = master.startswith("local")
    settings = {
        # jobs.progress prints stage progress as lines; Spark's own bar would garble them.
        "spark.ui.showConsoleProgress": "false",
    }
    if python is not None:
        settings[PYTHON_SETTING] = python
    if local or is_loopback_master(master):
        settings |= {
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.ui.enabled": "false",
        }
    if local:
        settings["spark.sql.shuffle.partitions"] = "4"
    for key, value in {**settings, **(conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    _quiet_task_failures(spark)
    register(spark)
    if not local if check_executors is None else check_executors:
        try:
            check_executor_python(spark)
        except BaseException:
            spark.stop()
            raise
    return spark
