"""A Spark standalone cluster on this machine: one Master and one Worker, started from the
``spark-class`` script that the pip-installed PySpark ships, bound to 127.0.0.1 only.

For tests and ``segmentstore bench spark``: a real cluster, whose executors are separate JVMs
that start their own Python workers, so the data source is pickled to other processes and each
of them opens Tier 2 on its own, as on a cluster of many machines. Both daemons ask the kernel
for free ports (port 0) and the ports they got are read from their logs, so no port is guessed
and raced for. Scratch space (``SPARK_LOCAL_DIRS``, the worker's directory, the logs) lives in
one temporary directory that :meth:`StandaloneCluster.stop` removes after killing both
daemons by PID.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

import pyspark

_MASTER_URL = re.compile(r"Starting Spark master at (spark://127\.0\.0\.1:\d+)")
_REGISTERED = "Successfully registered with master"


class ClusterStartError(RuntimeError):
    pass


class _Daemon:
    """One ``spark-class`` process whose log is copied to a file and watched for a line."""

    def __init__(self, name: str, arguments: list[str], env: dict[str, str], log: Path) -> None:
        self.name = name
        self.log_path = log
        self._text: list[str] = []
        self._changed = threading.Condition()
        home = Path(pyspark.__file__).parent
        self.proc = subprocess.Popen(
            [str(home / "bin" / "spark-class"), *arguments],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a Ctrl-C of the caller is not sent to the daemons
        )
        self._reader = threading.Thread(target=self._copy_log, name=f"{name}-log", daemon=True)
        self._reader.start()

    def _copy_log(self) -> None:
        assert self.proc.stdout is not None
        with open(self.log_path, "ab") as log:
            for line in self.proc.stdout:
                log.write(line)
                log.flush()
                with self._changed:
                    self._text.append(line.decode("utf-8", "replace"))
                    self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def wait_for(self, pattern: re.Pattern[str] | str, timeout_s: float) -> str:
        """The first log line that matches ``pattern`` (its first group, if it has one)."""
        deadline = time.monotonic() + timeout_s
        seen = 0
        with self._changed:
            while True:
                for line in self._text[seen:]:
                    found = re.search(pattern, line)
                    if found:
                        return found.group(1) if found.groups() else line
                seen = len(self._text)
                if self.proc.poll() is not None and not self._reader.is_alive():
                    raise ClusterStartError(f"the Spark {self.name} exited:\n{self.tail()}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ClusterStartError(
                        f"the Spark {self.name} did not start in {timeout_s} s:\n{self.tail()}"
                    )
                self._changed.wait(min(left, 0.5))

    def tail(self) -> str:
        return "".join(self._text[-20:])

    def kill(self, grace_s: float = 10.0) -> None:
        """SIGTERM, then SIGKILL, to the daemon's process group: the daemon (spark-class execs
        the JVM, so its PID is the daemon's) and what it started (a Worker's executors and
        their Python workers), which a lone SIGKILL of the Worker would leave running."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)
            try:
                self.proc.wait(timeout=grace_s)
                break
            except subprocess.TimeoutExpired:
                continue
        self.proc.wait(timeout=30)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # children that outlived the daemon
        self._reader.join(timeout=30)
        if self.proc.stdout is not None and not self._reader.is_alive():
            self.proc.stdout.close()


class StandaloneCluster:
    """``with StandaloneCluster(environment) as cluster: start_session(cluster.master_url, ...)``.

    ``environ`` is the daemons' environment (they need ``PATH`` or ``JAVA_HOME`` to find Java);
    the ``SPARK_*`` variables that place them on loopback and in the scratch directory are added.
    ``worker_cores`` and ``worker_memory`` are what the Worker offers to applications (an
    executor takes ``spark.executor.memory``, 1g by default, out of it). ``master_port``: the
    Master's port (0: one the kernel picks).
    """

    def __init__(
        self,
        environ: Mapping[str, str],
        *,
        worker_cores: int = 2,
        worker_memory: str = "2g",
        directory: str | None = None,
        start_timeout_s: float = 120.0,
        master_port: int = 0,
    ) -> None:
        self.scratch = Path(tempfile.mkdtemp(prefix="spark-standalone-", dir=directory))
        self.master_url = ""
        self._daemons: list[_Daemon] = []
        for folder in ("local", "work", "logs"):
            (self.scratch / folder).mkdir()
        self._env = {
            **environ,
            "SPARK_HOME": str(Path(pyspark.__file__).parent),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOCAL_DIRS": str(self.scratch / "local"),
            "SPARK_LOG_DIR": str(self.scratch / "logs"),
            "SPARK_WORKER_DIR": str(self.scratch / "work"),
        }
        self._cores = worker_cores
        self._memory = worker_memory
        self._timeout_s = start_timeout_s
        self._master_port = master_port

    def start(self) -> StandaloneCluster:
        try:
            master = self._daemon(
                "master",
                "org.apache.spark.deploy.master.Master",
                ["--host", "127.0.0.1", "--port", str(self._master_port), "--webui-port", "0"],
            )
            self.master_url = master.wait_for(_MASTER_URL, self._timeout_s)
            worker = self._daemon(
                "worker",
                "org.apache.spark.deploy.worker.Worker",
                [
                    self.master_url,
                    *("--host", "127.0.0.1", "--port", "0", "--webui-port", "0"),
                    *("--cores", str(self._cores), "--memory", self._memory),
                    *("--work-dir", str(self.scratch / "work")),
                ],
            )
            worker.wait_for(_REGISTERED, self._timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def _daemon(self, name: str, main_class: str, arguments: list[str]) -> _Daemon:
        daemon = _Daemon(
            name, [main_class, *arguments], self._env, self.scratch / "logs" / f"{name}.log"
        )
        self._daemons.append(daemon)
        return daemon

    @property
    def pids(self) -> list[int]:
        return [daemon.proc.pid for daemon in self._daemons]

    def session_conf(self) -> dict[str, str]:
        """What a driver on this machine needs to take part: executors reach it on loopback."""
        return {
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.ui.enabled": "false",
            "spark.executor.memory": "1g",
            "spark.cores.max": str(self._cores),
        }

    def stop(self) -> None:
        """Kill the Worker (and with it its executors), then the Master; remove the scratch."""
        for daemon in reversed(self._daemons):
            daemon.kill()
        self._daemons.clear()
        shutil.rmtree(self.scratch, ignore_errors=True)

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()
