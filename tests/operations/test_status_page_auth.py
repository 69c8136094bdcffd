"""The status page of a node with tokens configured, in a real browser: it asks for a token
and shows nothing of the store without one, nor with one the node refuses; with a good one
it shows the store, and forgetting the token takes it all off the page again."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import httpx
import pytest
from browser import read_page, wait_until
from selenium import webdriver
from selenium.webdriver.common.by import By

from segmentstore.harness.served_store import ServedStore

pytestmark = [pytest.mark.integration]

TOKENS = {"reader-token": "read", "admin-token": "admin"}
SEGMENT = "secret/plans/0"


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedStore]:
    root = tmp_path_factory.mktemp("secured-node")
    served = ServedStore(
        root / "data",
        root / "serve.log",
        {"SEGMENTSTORE_AUTH__TOKENS": json.dumps(TOKENS)},
        environ=os.environ,
    )
    try:
        served.wait_ready(60)
        admin = {"Authorization": "Bearer admin-token"}
        assert httpx.put(f"{served.url}/v1/segments/{SEGMENT}", headers=admin).status_code == 201
        yield served
    finally:
        served.stop()


def shows_nothing_of_the_store(page: dict[str, object]) -> None:
    assert page["loginShown"] and not page["statusShown"]
    assert not page["nodes"] and not page["containers"] and not page["segments"]
    assert not page["rates"] and not page["tail"]
    assert SEGMENT not in str(page["text"]) and "running" not in str(page["text"])


def give_token(browser: webdriver.Chrome, token: str) -> None:
    field = browser.find_element(By.ID, "token")
    field.clear()
    field.send_keys(token)
    browser.find_element(By.CSS_SELECTOR, "#token-form button[type=submit]").click()


def test_the_page_asks_for_a_token_and_shows_nothing_without_one(
    node: ServedStore, browser: webdriver.Chrome
) -> None:
    browser.get(node.url + "/")
    page = wait_until(
        "the page asks for a token", lambda: (p := read_page(browser))["loginShown"] and p, 10
    )
    shows_nothing_of_the_store(page)
    assert "A token is needed" in str(page["text"])

    give_token(browser, "not-a-token")
    refused = wait_until(
        "the page says the token was refused",
        lambda: "refused" in (p := read_page(browser))["text"] and p,
        10,
    )
    shows_nothing_of_the_store(refused)

    give_token(browser, "reader-token")
    shown = wait_until(
        "the page shows the store",
        lambda: (p := read_page(browser))["containers"] and p["segments"] and p,
        15,
    )
    assert not shown["loginShown"]
    assert [row["status"] for row in shown["containers"]] == ["running"] * 4
    assert [row["segment"] for row in shown["segments"]] == [SEGMENT]

    browser.find_element(By.ID, "forget-token").click()
    shows_nothing_of_the_store(read_page(browser))
