"""The data source and the three jobs on a real Spark standalone cluster (a Master and a
Worker from the pip PySpark, on loopback), over Tier 2 on S3 (moto's server): the same results
as on the test run's ``local[2]`` session, for segments of many chunks; and a worker Python
without the project fails with a message that says what to install.

The cluster's driver runs in a child process (``tests/support/cluster_jobs.py``): a process has
one SparkContext, and this one's is the shared local session.
"""

from __future__ import annotations

import io
import json
import os
import random
import subprocess
import sys
import uuid
import venv
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from segmentstore.harness.moto_s3 import MotoServer
from segmentstore.jobs.compact import compact_events
from segmentstore.jobs.export import export_events
from segmentstore.jobs.progress import Progress
from segmentstore.jobs.standalone import StandaloneCluster
from segmentstore.jobs.stats import segment_stats
from segmentstore.jobs.synthetic import write_segment
from segmentstore.tier2 import open_chunk_storage

from .conftest import frame, scan
from .test_jobs import keyed

pytestmark = [
    pytest.mark.spark,
    pytest.mark.s3,
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.standalone,
]

SUPPORT = Path(__file__).resolve().parents[1] / "support"
REPO = SUPPORT.parents[1]
CREDENTIALS = {"access_key": "testing", "secret_key": "testing", "region": "us-east-1"}


@pytest.fixture(scope="module")
def cluster() -> Iterator[StandaloneCluster]:
    with StandaloneCluster(os.environ, worker_cores=2, worker_memory="2g") as running:
        yield running


@pytest.fixture(scope="module")
def s3_tier2() -> Iterator[tuple[str, dict[str, str]]]:
    """Three segments of keyed events, in 16 KiB chunks, in a bucket on moto's S3 server."""
    with MotoServer() as server:
        options = {"endpoint_url": server.endpoint, **CREDENTIALS}
        uri = f"s3://cluster-tier2/{uuid.uuid4().hex}"
        storage = open_chunk_storage(uri, options={**options, "create_bucket": True})
        rng = random.Random(20)
        try:
            for i in range(3):
                appends = [
                    frame(
                        [
                            keyed(f"key-{rng.randint(0, 30)}".encode(), rng.randbytes(size))
                            for size in (rng.choice([0, 50, 400, 3000]) for _ in range(8))
                        ]
                    )
                    for _ in range(40)
                ]
                manifest = write_segment(
                    storage, f"cluster/{i}", iter(appends), chunk_bytes=16 * 1024
                )
                assert len(manifest.chunks) > 5
        finally:
            storage.close()
        yield uri, options


def python_without_the_project(where: Path) -> str:
    """A virtual environment of this interpreter's Python with nothing installed."""
    venv.create(where, with_pip=False)
    return str(where / "bin" / "python")


@pytest.mark.timeout(900)  # a cluster and three drivers start on a 2-core machine
def test_the_cluster_gives_what_local_spark_gives(
    spark: Any,
    cluster: StandaloneCluster,
    s3_tier2: tuple[str, dict[str, str]],
    tmp_path: Path,
) -> None:
    uri, backend = s3_tier2
    out = tmp_path / "cluster"
    out.mkdir()
    arguments = {
        "master": cluster.master_url,
        "tier2": uri,
        "options": backend,
        "conf": cluster.session_conf(),
        "bare_python": python_without_the_project(tmp_path / "bare"),
        "out": str(out),
    }
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(SUPPORT)])}
    env.pop("PYSPARK_PYTHON", None)
    process = subprocess.run(
        [sys.executable, str(SUPPORT / "cluster_jobs.py"), json.dumps(arguments)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert process.returncode == 0, process.stderr[-5000:]
    result = json.loads((out / "result.json").read_text())

    bare = result["bare_python"]
    assert bare["code"] == 1
    assert "cannot import pyarrow, segmentstore.jobs, segmentstore.tier2" in bare["stderr"]
    assert "pip install 'segmentstore[spark]'" in bare["stderr"]
    assert str(tmp_path / "bare") in bare["stderr"]
    assert "Traceback" not in bare["stderr"]
    assert result["stats"]["code"] == 0, result["stats"]["stderr"]

    options = {"tier2": uri, "segments": "cluster/*"}
    options |= {f"tier2.{key}": value for key, value in backend.items()}
    local_rows = scan(spark, **options)
    cluster_rows = sorted(
        (r["segment"], r["offset"], bytes(r["event"]), r["chunk"])
        for r in spark.read.parquet(str(out / "read")).collect()
    )
    assert len({chunk for *_, chunk in local_rows}) > 15
    assert cluster_rows == local_rows

    quiet = Progress(spark, io.StringIO())
    stats = json.loads((out / "stats.json").read_text())["results"]
    assert stats == json.loads(json.dumps(segment_stats(spark, options, quiet)))

    for job, run in (("export", export_events), ("compact", compact_events)):
        local_output = str(tmp_path / f"local-{job}")
        summary = run(spark, options, local_output, quiet)
        assert summary["events"] == len(local_rows)
        assert result[job] == {**summary, "output": str(out / job)}
        assert parquet_rows(spark, out / job) == parquet_rows(spark, local_output)


def parquet_rows(spark: Any, path: Path | str) -> list[tuple[Any, ...]]:
    rows = spark.read.parquet(str(path)).collect()
    return sorted(tuple(bytes(v) if isinstance(v, bytearray) else v for v in r) for r in rows)
