"""A real Prometheus server (Debian's ``prometheus``) on loopback, for tests that watch the
store's metrics and alerts the way an operator's Prometheus does.

It scrapes the targets it is given (a file it watches, so targets can come and go) every
second as the job ``segmentstore``, and evaluates the project's alerts every second with every
duration scaled from minutes to seconds (:func:`scaled_rules`): a ``for: 10m`` alert fires
after 10 s of its condition, over windows that hold the same number of scrapes relative to
the real interval. The server is started and stopped by PID, its data in a temporary folder.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import yaml

from segmentstore.loopback import free_port

REPO = Path(__file__).resolve().parents[2]
ALERTS = REPO / "helm" / "segmentstore" / "monitoring" / "alerts.yaml"
DASHBOARD = REPO / "helm" / "segmentstore" / "monitoring" / "dashboard.json"
JOB = "segmentstore"

_DURATION = re.compile(r"(\[|offset |^)(\d+)([mh])(\]|\b)")


def _seconds_for_minutes(text: str) -> str:
    """Every ``Nm``/``Nh`` duration in a PromQL expression or a ``for:`` made ``N``/``60N``
    seconds."""

    def scaled(found: re.Match[str]) -> str:
        before, count, unit, after = found.groups()
        seconds = int(count) * (60 if unit == "h" else 1)
        return f"{before}{seconds}s{after}"

    return _DURATION.sub(scaled, text)


def scaled_rules(source: Path = ALERTS) -> dict[str, Any]:
    """The rules file with minutes as seconds (see the module doc)."""
    rules = yaml.safe_load(source.read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            rule["expr"] = _seconds_for_minutes(rule["expr"])
            if "for" in rule:
                rule["for"] = _seconds_for_minutes(rule["for"])
    return dict(rules)


class PrometheusServer:
    def __init__(self, binary: str, work_dir: Path) -> None:
        self.work_dir = work_dir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._targets = work_dir / "targets.json"
        self.set_targets([])
        (work_dir / "alerts.yaml").write_text(yaml.safe_dump(scaled_rules(), sort_keys=False))
        config = {
            "global": {
                "scrape_interval": "1s",
                "scrape_timeout": "1s",
                "evaluation_interval": "1s",
            },
            "rule_files": [str(work_dir / "alerts.yaml")],
            "scrape_configs": [
                {
                    "job_name": JOB,
                    "file_sd_configs": [{"files": [str(self._targets)], "refresh_interval": "1s"}],
                }
            ],
        }
        (work_dir / "prometheus.yml").write_text(yaml.safe_dump(config))
        self._log = open(work_dir / "prometheus.log", "wb")  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen(
            [
                binary,
                f"--config.file={work_dir / 'prometheus.yml'}",
                f"--storage.tsdb.path={work_dir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--log.level=warn",
            ],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self.http = httpx.Client(base_url=self.url, timeout=10)
        self._wait_ready(30)

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited with {self.proc.returncode}:\n{self.log()}")
            try:
                if self.http.get("/-/ready").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"prometheus was not ready in {timeout_s} s:\n{self.log()}")

    def log(self) -> str:
        return (self.work_dir / "prometheus.log").read_text(errors="replace")[-5000:]

    def set_targets(self, urls: list[str]) -> None:
        """Scrape exactly these nodes (``http://host:port``) from now on."""
        hosts = [url.split("://", 1)[1].rstrip("/") for url in urls]
        written = self._targets.with_suffix(".tmp")
        written.write_text(json.dumps([{"targets": hosts}] if hosts else []))
        written.replace(self._targets)  # whole or not at all, for the file watcher

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's result: ``[{"metric": {...}, "value": [t, "v"]}, ...]``."""
        answer = self.http.get("/api/v1/query", params={"query": expr})
        body = answer.json()
        if body.get("status") != "success":
            raise AssertionError(f"{expr!r}: {answer.status_code} {body}")
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def alerts(self, name: str) -> list[dict[str, Any]]:
        """The pending and firing alerts named ``name`` (a resolved alert is no longer here)."""
        found = self.http.get("/api/v1/alerts").json()["data"]["alerts"]
        return [a for a in found if a["labels"]["alertname"] == name]

    def firing(self, name: str) -> list[dict[str, Any]]:
        return [a for a in self.alerts(name) if a["state"] == "firing"]

    def wait_for(self, what: str, condition: Callable[[], Any], timeout_s: float) -> float:
        """Polls ``condition`` until it is true; the seconds it took."""
        started = time.monotonic()
        while not condition():
            if time.monotonic() - started > timeout_s:
                raise AssertionError(f"not within {timeout_s} s: {what}\n{self.log()}")
            time.sleep(0.2)
        return time.monotonic() - started

    def wait_scraped(self, count: int, timeout_s: float = 30) -> None:
        """Until ``count`` targets are up and scraped."""
        self.wait_for(
            f"{count} targets up",
            lambda: len(self.query(f'up{{job="{JOB}"}} == 1')) == count,
            timeout_s,
        )

    def stop(self) -> None:
        self.http.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
