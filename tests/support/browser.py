"""A real browser for the status page: Debian's headless Chromium driven by Selenium through
Debian's chromedriver (both installed by :mod:`debian_packages` when missing). Selenium is
given the driver's path, so it never tries to download one; Chromium runs with a fresh empty
profile and with everything that would reach the internet by itself turned off."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from debian_packages import require
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

T = TypeVar("T")

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",  # the tests run as root, where Chromium's sandbox refuses to start
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--window-size=1280,1400",
)


@contextmanager
def headless_chromium() -> Iterator[webdriver.Chrome]:
    chromium = require("chromium", "chromium")
    driver_path = require("chromedriver", "chromium-driver")
    profile = tempfile.mkdtemp(prefix="segmentstore-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    try:
        yield driver
    finally:
        driver.quit()  # ends chromedriver and every Chromium process it started
        shutil.rmtree(profile, ignore_errors=True)


def wait_until(what: str, probe: Callable[[], T | None], timeout_s: float) -> T:
    """Polls ``probe`` every 50 ms until it gives something true; that."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = probe()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s} s: {what}")
        time.sleep(0.05)


# The page's tables as data, read in one round trip (the rows carry data-* attributes).
READ_PAGE = """
const rows = (id) => [...document.querySelectorAll('#' + id + ' tbody tr')]
    .map((row) => ({...row.dataset, text: row.innerText}));
return {
    nodes: rows('nodes'),
    containers: rows('containers'),
    segments: rows('segments'),
    loginShown: !document.getElementById('login').hidden,
    statusShown: !document.getElementById('status').hidden,
    rates: Object.fromEntries([...document.querySelectorAll('#rates dd')]
        .map((dd) => [dd.dataset.rate, dd.textContent])),
    tail: document.getElementById('tail').textContent,
    text: document.body.innerText,
};
"""
# The page redraws its tables every few seconds: a row found in one round trip may be gone by
# the next, so a segment is found and clicked in one.
CLICK_SEGMENT = """
const link = [...document.querySelectorAll('#segments button.link')]
    .find((button) => button.textContent === arguments[0]);
if (link) { link.click(); }
return Boolean(link);
"""


def read_page(driver: webdriver.Chrome) -> dict[str, Any]:
    page = driver.execute_script(READ_PAGE)
    assert isinstance(page, dict)
    return page


def click_segment(driver: webdriver.Chrome, name: str) -> bool:
    """Clicks the segment ``name`` in the page's list, if it is listed now."""
    return bool(driver.execute_script(CLICK_SEGMENT, name))
