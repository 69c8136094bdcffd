"""The Spark blocks of the README and docs/ run as written on a standalone Master and Worker
on 127.0.0.1, named by ``MASTER`` as the pages say (``test_docs_spark.py`` runs them on
``local[2]``, and says how a user's environment is made).

The block that starts a standalone cluster of its own is left out here: it does not read
``MASTER``, and it has run on local Spark already.
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

OWN_CLUSTER = [b for b in SPARK_BLOCKS if "segmentstore spark standalone" in b.text]


def test_the_block_with_a_cluster_of_its_own_is_the_only_one_left_out() -> None:
    assert len(OWN_CLUSTER) == 1 and "MASTER" not in OWN_CLUSTER[0].text.replace(
        "SPARK_MASTER_PORT", ""
    )


@pytest.mark.timeout(1200)
def test_every_spark_block_runs_as_written_on_a_standalone_cluster(
    prepared: Prepared, tmp_path: Path
) -> None:
    with StandaloneCluster(os.environ, worker_cores=2) as cluster:
        blocks = [b for b in SPARK_BLOCKS if b not in OWN_CLUSTER]
        run_every_block(blocks, cluster.master_url, prepared, tmp_path)
