"""The Spark session of ``segmentstore spark`` and ``segmentstore bench spark``.

Local Spark (``local[2]``) by default; any master URL for a cluster, whose executors need this
project installed in the Python that ``PYSPARK_PYTHON`` names. On a local master the driver
binds to 127.0.0.1 only and the web UI stays off.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import SparkSession

from segmentstore.jobs import register

DEFAULT_MASTER = "local[2]"


def start_session(
    master: str = DEFAULT_MASTER,
    app_name: str = "segmentstore",
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """A session with the ``segmentstore`` data source registered."""
    builder = SparkSession.builder.master(master).appName(app_name)
    settings = {
        # jobs.progress prints stage progress as lines; Spark's own bar would garble them.
        "spark.ui.showConsoleProgress": "false",
    }
    if master.startswith("local"):
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
    register(spark)
    return spark
