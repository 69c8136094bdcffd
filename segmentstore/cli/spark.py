"""``segmentstore spark stats|export|compact``: the Spark batch jobs over Tier 2."""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any


def add_command(commands: Any) -> None:
    spark = commands.add_parser(
        "spark", help="Spark batch jobs over Tier 2 (local Spark unless --master)"
    )
    jobs = spark.add_subparsers(dest="job", required=True)
    for job, about in (
        ("stats", "events, bytes, first/last offset per segment"),
        ("export", "events to Parquet, partitioned by segment"),
        ("compact", "the last value per key (payload: key length u16be | key | value)"),
    ):
        command = jobs.add_parser(job, help=about)
        command.add_argument("tier2", help="file:///path, s3://bucket/prefix, hdfs://host/path")
        if job != "stats":
            command.add_argument("output", help="where Spark writes the Parquet files")
            command.add_argument("--overwrite", action="store_true", help="replace the output")
        command.add_argument(
            "--segments", default="*", help="names, or prefixes ending in '*' (default: all)"
        )
        command.add_argument(
            "--option",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="Tier 2 backend option, e.g. endpoint_url=http://127.0.0.1:9000 (repeatable)",
        )
        command.add_argument("--starting-offsets", default="earliest", help='or {"seg": N}')
        command.add_argument("--ending-offsets", default="latest", help='or {"seg": N}')
        command.add_argument("--fail-on-data-loss", choices=["true", "false"], default="true")
        command.add_argument(
            "--master",
            default=None,
            help="Spark master URL (default: $MASTER, as spark-submit reads it, else local[2])",
        )
        command.add_argument(
            "--python",
            default=None,
            help="the executors' Python, at the same path on every worker (default: "
            "$PYSPARK_PYTHON, else this interpreter)",
        )
        command.add_argument(
            "--conf",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="a Spark setting, e.g. spark.executor.memory=4g (repeatable)",
        )
        command.add_argument("--json", default=None, help="also write the summary here")
        command.set_defaults(run=run)
    standalone = jobs.add_parser(
        "standalone",
        help="a Spark standalone cluster on this machine (a Master and a Worker on 127.0.0.1), "
        "until stopped",
    )
    standalone.add_argument("--port", type=int, default=7077, help="the Master's port")
    standalone.add_argument("--cores", type=int, default=2, help="cores the Worker offers")
    standalone.add_argument("--memory", default="2g", help="memory the Worker offers")
    standalone.set_defaults(run=run_standalone)


def run_standalone(args: argparse.Namespace) -> int:
    """Start a Master and a Worker from the installed PySpark's ``spark-class``, print the
    master URL, and stop both (and the Worker's executors) on SIGTERM or Ctrl-C."""
    from segmentstore.jobs.standalone import ClusterStartError, StandaloneCluster

    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    cluster = StandaloneCluster(
        os.environ, worker_cores=args.cores, worker_memory=args.memory, master_port=args.port
    )
    try:
        cluster.start()
    except ClusterStartError as error:
        print(f"segmentstore spark standalone: {error}", file=sys.stderr)
        return 1
    try:
        print(cluster.master_url, flush=True)
        print(
            f"a Master at {cluster.master_url} and a Worker with {args.cores} cores; "
            "SIGTERM or Ctrl-C stops both",
            file=sys.stderr,
            flush=True,
        )
        stop.wait()
    finally:
        cluster.stop()
    return 0


def default_master() -> str:
    """``$MASTER`` (the variable spark-submit reads), else local Spark."""
    return os.environ.get("MASTER") or "local[2]"


def use_this_python_for_spark_workers() -> None:
    # A local Spark starts its Python workers with PYSPARK_PYTHON (else "python3"): make it
    # this interpreter, the one with the jobs installed. A cluster's own setting wins.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def executor_python(given: str | None) -> str:
    """``--python``, else ``$PYSPARK_PYTHON``, else this interpreter (which has the jobs)."""
    return given or os.environ.get("PYSPARK_PYTHON") or sys.executable


def key_values(items: list[str], flag: str) -> dict[str, str]:
    pairs = {}
    for item in items:
        key, equals, value = item.partition("=")
        if not equals or not key:
            raise SystemExit(f"{flag} takes KEY=VALUE, not {item!r}")
        pairs[key] = value
    return pairs


def write_summary(path: str | None, job: str, rows: list[dict[str, Any]]) -> None:
    if path:
        Path(path).write_text(json.dumps({"job": job, "results": rows}, indent=2) + "\n")
        print(f"wrote {path}")


def run(args: argparse.Namespace) -> int:
    from segmentstore.bench.report import print_table
    from segmentstore.jobs.command import run_job  # lazily: only the spark jobs load Spark
    from segmentstore.jobs.daemon_noise import cancelled_worker_noise_filtered
    from segmentstore.jobs.failures import one_line

    logging.getLogger("py4j").setLevel(logging.WARNING)  # its INFO lines say nothing to a user

    options = {
        "tier2": args.tier2,
        "segments": args.segments,
        "starting_offsets": args.starting_offsets,
        "ending_offsets": args.ending_offsets,
        "fail_on_data_loss": args.fail_on_data_loss,
    }
    for key, value in key_values(args.option, "--option").items():
        options[f"tier2.{key}"] = value
    conf = key_values(args.conf, "--conf")
    with cancelled_worker_noise_filtered():
        try:
            summary = run_job(
                args.job,
                options,
                master=args.master or default_master(),
                output=getattr(args, "output", None),
                overwrite=getattr(args, "overwrite", False),
                python=executor_python(args.python),
                conf=conf,
            )
        except Exception as error:  # Spark's errors carry the data source's message inside
            logging.getLogger(__name__).debug(
                "segmentstore spark %s failed", args.job, exc_info=True
            )
            print(f"segmentstore spark {args.job}: failed: {one_line(error)}", file=sys.stderr)
            return 1
    print_table(summary.rows, summary.columns)
    write_summary(args.json, args.job, summary.rows)
    return 0
