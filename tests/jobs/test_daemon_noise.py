"""The job console's filter drops the daemon's tracebacks of cancelled tasks and nothing else."""

from __future__ import annotations

import subprocess
import sys
import textwrap

CANCELLED = """Traceback (most recent call last):
  File "/venv/pyspark.zip/pyspark/daemon.py", line 264, in manager
  File "/venv/pyspark.zip/pyspark/daemon.py", line 65, in worker
  File "/venv/pyspark.zip/pyspark/serializers.py", line 565, in loads
    length = read_int(stream)
             ^^^^^^^^^^^^^^^^
  File "/venv/pyspark.zip/pyspark/serializers.py", line 604, in read_int
    raise EOFError
EOFError
"""

OURS = """Traceback (most recent call last):
  File "/venv/pyspark.zip/pyspark/daemon.py", line 264, in manager
  File "/repo/jobs/partition_reader.py", line 10, in read
    raise EOFError
EOFError
"""

FAILED_IN_DAEMON = """Traceback (most recent call last):
  File "/venv/pyspark.zip/pyspark/daemon.py", line 264, in manager
MemoryError: cannot fork
"""


def filtered(text: str, after: str = "") -> str:
    """What reaches the console when a process writes ``text`` to its standard error (file
    descriptor 2, as the JVM does) inside the filter and ``after`` once it is left."""
    program = textwrap.dedent(
        f"""
        import os, sys
        from segmentstore.jobs.daemon_noise import cancelled_worker_noise_filtered
        with cancelled_worker_noise_filtered():
            for piece in {text!r}.encode().split(b"\\n"):  # line by line, as a copy thread does
                os.write(2, piece + b"\\n")
            print("the job's one line", file=sys.stderr)
        print({after!r}, file=sys.stderr, end="")
        """
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stderr.decode()


def test_a_cancelled_workers_traceback_is_dropped_and_the_lines_around_it_kept() -> None:
    out = filtered("Spark started\n" + CANCELLED + "stage 0 failed", after="bye\n")
    assert out == "Spark started\nstage 0 failed\nthe job's one line\nbye\n"


def test_tracebacks_through_other_code_or_with_other_errors_pass_unchanged() -> None:
    assert filtered(OURS) == OURS + "\nthe job's one line\n"
    assert filtered(FAILED_IN_DAEMON) == FAILED_IN_DAEMON + "\nthe job's one line\n"
