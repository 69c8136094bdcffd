"""The Spark blocks of the README and docs/ run as written on a standalone Master and Worker
on 127.0.0.1, named by ``MASTER`` as the pages say (``test_docs_spark.py`` runs every block
on ``local[2]``, and says how a user's environment is made).

Here: every Python block (each starts its session on ``$MASTER``) and the README's job (the
command takes ``$MASTER`` too). Left out: the block that starts a cluster of its own (it
ignores ``MASTER``; the local run runs it, and its job on that cluster), and the page's three
jobs one after another (test_standalone.py runs all three on a standalone cluster against
local Spark, over many chunks on S3).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from segmentstore.jobs.standalone import StandaloneCluster

from .test_docs_spark import SPARK_BLOCKS, Prepared, prepared, run_every_block

pytestmark = [
    pytest.mark.spark,
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.standalone,
]

__all__ = ["prepared"]  # the fixture, shared with the local run's module

ON_A_CLUSTER = [b for b in SPARK_BLOCKS if b.lang == "python" or b.path.name == "README.md"]


def test_the_blocks_left_out_are_the_page_s_jobs_and_its_own_cluster() -> None:
    left_out = [b for b in SPARK_BLOCKS if b not in ON_A_CLUSTER]
    assert len(left_out) == 2 and all(b.path.name == "spark.md" for b in left_out)
    assert any("segmentstore spark standalone" in b.text for b in left_out)
    assert any("spark compact" in b.text and "spark export" in b.text for b in left_out)


@pytest.mark.timeout(1200)
def test_the_spark_blocks_run_as_written_on_a_standalone_cluster(
    prepared: Prepared, tmp_path: Path
) -> None:
    with StandaloneCluster(os.environ, worker_cores=2) as cluster:
        run_every_block(ON_A_CLUSTER, cluster.master_url, prepared, tmp_path)
