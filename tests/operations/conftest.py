"""Fixtures of the operator's view: a real Prometheus per module (scraping what the module's
tests point it at, with the project's alerts at minutes-as-seconds), a headless Chromium per
module, and promtool; each installed from Debian when missing."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from browser import headless_chromium
from debian_packages import require
from prometheus_server import PrometheusServer
from selenium import webdriver


@pytest.fixture(scope="session")
def promtool() -> str:
    return require("promtool", "prometheus")


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    server = PrometheusServer(
        require("prometheus", "prometheus"), tmp_path_factory.mktemp("prometheus")
    )
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    with headless_chromium() as driver:
        yield driver
