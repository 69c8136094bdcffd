"""The status page's rates against a real node, in a real browser: its script parses every line
of the node's ``/metrics`` as Prometheus' own parser does (labels that hold ``{name}`` and
commas included), and under a steady load of appends the requests per second it shows are
within 20 % of what the node's counters say."""

from __future__ import annotations

import os
import re
import statistics
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from browser import read_page, wait_until
from prometheus_client.parser import text_string_to_metric_families
from selenium import webdriver

from segmentstore.harness.served_store import ServedStore

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SEGMENTS = [f"rates/{i}" for i in range(8)]
APPENDS_PER_S = 300


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedStore]:
    root = tmp_path_factory.mktemp("rates-node")
    served = ServedStore(root / "data", root / "serve.log", environ=os.environ)
    try:
        served.wait_ready(60)
        with httpx.Client(base_url=served.url, timeout=30) as http:
            for name in SEGMENTS:
                assert http.put(f"/v1/segments/{name}").status_code == 201
                assert http.post(f"/v1/segments/{name}:append", content=b"x").status_code == 200
                assert http.get(f"/v1/segments/{name}:read", params={"offset": 0}).is_success
                assert http.get(f"/v1/segments/{name}/no/such").status_code == 404
            assert http.get("/v1/containers/99:restart").status_code == 405
        yield served
    finally:
        served.stop()


@pytest.fixture(scope="module")
def page(node: ServedStore, browser: webdriver.Chrome) -> webdriver.Chrome:
    browser.get(node.url + "/")
    wait_until("the page shows the node", lambda: read_page(browser)["statusShown"], 15)
    return browser


def python_sums(text: str) -> dict[str, float]:
    """What the page must make of ``text``: each sample's value summed per sample name, and
    the answers with a 5xx status (``http_5xx``), by Prometheus' own parser."""
    sums: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            sums[sample.name] = sums.get(sample.name, 0.0) + sample.value
            status = sample.labels.get("status", "")
            if sample.name == "segmentstore_http_requests_total" and status.startswith("5"):
                sums["http_5xx"] = sums.get("http_5xx", 0.0) + sample.value
    return sums


def with_server_errors(text: str) -> str:
    """``text`` with, beside each request line of a route holding ``{name}``, the same line
    answered 503 (a recovering container's): a node under no fault shows none."""
    lines = []
    for line in text.splitlines():
        lines.append(line)
        if line.startswith("segmentstore_http_requests_total{") and "{name}" in line:
            lines.append(re.sub(r'status="\d+"', 'status="503"', line))
    return "\n".join(lines) + "\n"


def test_the_page_parses_every_line_of_a_real_nodes_metrics(
    node: ServedStore, page: webdriver.Chrome
) -> None:
    text = with_server_errors(httpx.get(f"{node.url}/metrics", timeout=10).text)
    assert '/v1/segments/{name}:append",status="200"' in text
    assert 'status="503"' in text
    parsed = page.execute_script("return Object.fromEntries(parseMetrics(arguments[0]));", text)
    expected = python_sums(text)
    assert expected["http_5xx"] > 0
    assert set(parsed) == set(expected)
    for name, value in expected.items():
        assert parsed[name] == pytest.approx(value, rel=1e-9), name
    requests = [line for line in text.splitlines() if line.startswith("segmentstore_http_req")]
    print(f"{len(text.splitlines())} lines, {len(requests)} of HTTP requests: the page agrees")


class Load:
    """Appends at a steady pace from two threads until stopped."""

    def __init__(self, url: str, per_s: int) -> None:
        self.url = url
        self.interval_s = 2 / per_s  # each of the two threads sends half
        self.sent = 0
        self.failed: list[str] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(i,)) for i in range(2)]

    def __enter__(self) -> Load:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def _run(self, index: int) -> None:
        with httpx.Client(base_url=self.url, timeout=30) as http:
            due = time.monotonic()
            while not self._stop.is_set():
                name = SEGMENTS[(self.sent + index) % len(SEGMENTS)]
                answer = http.post(f"/v1/segments/{name}:append", content=b"r" * 256)
                if answer.status_code != 200:
                    self.failed.append(answer.text)
                self.sent += 1
                due += self.interval_s
                self._stop.wait(max(0.0, due - time.monotonic()))


def requests_total(url: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=10).text
    return python_sums(text)["segmentstore_http_requests_total"]


def test_under_append_load_the_page_shows_requests_per_second_within_20_percent(
    node: ServedStore, page: webdriver.Chrome
) -> None:
    with Load(node.url, APPENDS_PER_S) as load:
        time.sleep(3)  # steady, and two of the page's readings in
        started, counted = time.monotonic(), requests_total(node.url)
        shown: list[float] = []
        last = ""
        while time.monotonic() - started < 12:
            text = read_page(page)["rates"].get("segmentstore_http_requests_total", "")
            if re.fullmatch(r"\d+\.\d", text) and text != last:
                shown.append(float(text))
                last = text
            time.sleep(0.2)
        rate = (requests_total(node.url) - counted) / (time.monotonic() - started)
    assert not load.failed, load.failed[:3]
    print(
        f"the node's counters: {rate:.1f} requests/s ({load.sent} appends sent at"
        f" {APPENDS_PER_S}/s); the page showed {shown}"
    )
    assert len(shown) >= 4, shown
    assert rate > APPENDS_PER_S / 3, "the load did not get going"
    assert abs(statistics.median(shown) - rate) <= 0.2 * rate, (shown, rate)
    five_xx = read_page(page)["rates"].get("http_5xx")
    assert five_xx == "0.0", five_xx
