"""Where the ``export`` and ``compact`` jobs write: Parquet, partitioned by segment."""

from __future__ import annotations

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame

from segmentstore.jobs.errors import OutputExistsError


def write_by_segment(rows: DataFrame, output: str, *, overwrite: bool) -> None:
    """Write ``rows`` under ``output`` (``segment=<name>`` directories); an existing output is
    :class:`OutputExistsError` unless ``overwrite``."""
    writer = rows.write.mode("overwrite" if overwrite else "errorifexists")
    try:
        writer.partitionBy("segment").parquet(output)
    except AnalysisException as error:
        if error.getCondition() == "PATH_ALREADY_EXISTS":
            raise OutputExistsError(output) from None
        raise
