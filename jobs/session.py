"""The Spark session of ``segmentstore spark`` and ``segmentstore bench spark``.

Local Spark (``local[2]``) by default; any master URL for a cluster. The executors start their
Python workers with ``python`` (``spark.pyspark.python``), which must have this project and
pyarrow installed, at the same path on every worker machine; the command line passes its own
interpreter unless told otherwise. On a cluster the session first checks that Python
(:mod:`segmentstore.jobs.executor_python`), so a worker without the project fails with a message
that says what to install instead of a ``ModuleNotFoundError`` inside a Java stack trace. On a
local master the driver binds to 127.0.0.1 only and the web UI stays off.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import SparkSession

from segmentstore.jobs import register
from segmentstore.jobs.executor_python import check_executor_python

DEFAULT_MASTER = "local[2]"


def start_session(
    master: str = DEFAULT_MASTER,
    app_name: str = "segmentstore",
    conf: Mapping[str, str] | None = None,
    *,
    python: str | None = None,
    check_executors: bool | None = None,
) -> SparkSession:
    """A session with the ``segmentstore`` data source registered.

    ``python``: the executors' Python (``spark.pyspark.python``); None leaves it to Spark
    (``PYSPARK_PYTHON``, else ``python3``). ``check_executors``: probe that Python before
    returning (default: on any master but a local one).
    """
    builder = SparkSession.builder.master(master).appName(app_name)
    local = master.startswith("local")
    settings = {
        # jobs.progress prints stage progress as lines; Spark's own bar would garble them.
        "spark.ui.showConsoleProgress": "false",
    }
    if python is not None:
        settings["spark.pyspark.python"] = python
    if local:
        settings |= {
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "4",
        }
    for key, value in {**settings, **(conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    if python is not None:
        # A Python driver ships its own choice with every Python function and data source it
        # registers (SparkContext.pythonExec, taken from $PYSPARK_PYTHON when the context
        # starts); the spark.pyspark.python setting alone is read only by spark-submit.
        spark.sparkContext.pythonExec = python
    register(spark)
    if not local if check_executors is None else check_executors:
        try:
            check_executor_python(spark)
        except BaseException:
            spark.stop()
            raise
    return spark
