"""The driver side of the standalone-cluster tests, run as its own process (a process has one
SparkContext, and the test run's shared one is local): against the master URL it is given,

1. ``segmentstore spark stats`` with ``--python`` naming a Python that lacks the project and
   pyarrow, which must fail with the message that says what to install;
2. ``segmentstore spark stats`` with the project's Python, as a user runs it;
3. on one session (each driver costs tens of seconds here): ``spark.read.format("segmentstore")``
   with its rows saved to Parquet, then the export and compact jobs, through the functions
   that ``segmentstore spark export|compact`` call.

Usage: ``python cluster_jobs.py '{"master": ..., "tier2": ..., "options": {...},
"conf": {...}, "bare_python": ..., "out": ...}'``; it writes ``out/result.json`` with the
exit codes and the error output of each run, and the jobs' outputs under ``out``.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path

from segmentstore.cli import main


def run_cli(argv: list[str]) -> tuple[int, str]:
    errors = io.StringIO()
    with contextlib.redirect_stderr(errors):
        code = main(argv)
    return code, errors.getvalue()


def run() -> None:
    given = json.loads(sys.argv[1])
    master, tier2, out = given["master"], given["tier2"], Path(given["out"])
    common = ["--master", master, "--segments", "cluster/*"]
    for key, value in given["options"].items():
        common += ["--option", f"{key}={value}"]
    for key, value in given["conf"].items():
        common += ["--conf", f"{key}={value}"]
    result: dict[str, object] = {}
    code, errors = run_cli(["spark", "stats", tier2, *common, "--python", given["bare_python"]])
    result["bare_python"] = {"code": code, "stderr": errors[-3000:]}
    report = ["--json", str(out / "stats.json")]
    code, errors = run_cli(["spark", "stats", tier2, *report, *common, "--python", sys.executable])
    result["stats"] = {"code": code, "stderr": errors[-3000:]}

    from segmentstore.jobs.compact import compact_events
    from segmentstore.jobs.export import export_events
    from segmentstore.jobs.progress import Progress
    from segmentstore.jobs.session import start_session

    options = {"tier2": tier2, "segments": "cluster/*"}
    options |= {f"tier2.{key}": value for key, value in given["options"].items()}
    spark = start_session(master, "cluster-jobs", given["conf"], python=sys.executable)
    try:
        spark.read.format("segmentstore").options(**options).load().write.parquet(str(out / "read"))
        progress = Progress(spark)
        for job, write in (("export", export_events), ("compact", compact_events)):
            result[job] = write(spark, options, str(out / job), progress)
    finally:
        spark.stop()
    (out / "result.json").write_text(json.dumps(result))


if __name__ == "__main__":
    run()
