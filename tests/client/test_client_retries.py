"""Retries: only where they cannot change the outcome, and never a duplicated append.

A :class:`FlakyProxy` between client and server loses answers after the server applied the
request, or answers ``503``/``429`` itself, deterministically.
"""

from __future__ import annotations

import email.utils
import json
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

import segmentstore.contracts.errors as e
from segmentstore.client import RetryPolicy, SegmentStoreClient
from segmentstore.client.retry import retry_after_s

from .conftest import FlakyProxy, LiveServer

FAST = RetryPolicy(max_attempts=5, initial_backoff_s=0.01, max_backoff_s=0.05, deadline_s=10)


@pytest.fixture
def direct(live: LiveServer) -> Iterator[SegmentStoreClient]:
    """A client that bypasses the proxy, to see what the store really holds."""
    with SegmentStoreClient(live.url) as store:
        yield store


@pytest.fixture
def flaky(proxy: FlakyProxy) -> Iterator[SegmentStoreClient]:
    with SegmentStoreClient(proxy.url, retry=FAST) as store:
        yield store


def _sent(proxy: FlakyProxy, action: str) -> list[str]:
    return [head for head in proxy.requests if f":{action}" in head.split("\r\n", 1)[0]]


def test_lost_answer_to_an_exactly_once_append_does_not_duplicate(
    proxy: FlakyProxy, flaky: SegmentStoreClient, direct: SegmentStoreClient, name: str
) -> None:
    direct.create_segment(name)
    direct.append(name, b"before|")
    proxy.drop_response(":append")
    result = flaky.append(name, b"once", writer_id="writer-1", writer_seq=7)
    # The first attempt was applied and its answer lost; the retry is the duplicate.
    assert (result.offset, result.length, result.duplicate) == (None, 11, True)
    assert direct.read(name, 0).data == b"before|once"
    sent = _sent(proxy, "append")
    assert len(sent) == 2
    assert all("writer-seq: 7" in head.lower() for head in sent)
    # The next sequence number appends as usual.
    assert flaky.append(name, b"!", writer_id="writer-1", writer_seq=8).offset == 11


def test_lost_answer_to_an_exactly_once_event_batch_does_not_duplicate(
    proxy: FlakyProxy, flaky: SegmentStoreClient, direct: SegmentStoreClient, name: str
) -> None:
    direct.create_segment(name)
    proxy.drop_response(":appendEvents")
    result = flaky.append_events(name, [b"e1", b"e2"], writer_id="w", writer_seq=0)
    assert result.duplicate
    assert direct.read_events(name, 0).events() == [b"e1", b"e2"]


def test_lost_answer_to_a_plain_append_is_not_retried(
    proxy: FlakyProxy, flaky: SegmentStoreClient, direct: SegmentStoreClient, name: str
) -> None:
    direct.create_segment(name)
    proxy.drop_response(":append")
    with pytest.raises(httpx.TransportError):
        flaky.append(name, b"maybe")
    assert len(_sent(proxy, "append")) == 1
    # It was applied: a blind retry would have written it twice.
    assert direct.read(name, 0).data == b"maybe"


def test_lost_answers_to_idempotent_requests_are_retried(
    proxy: FlakyProxy, flaky: SegmentStoreClient, direct: SegmentStoreClient, name: str
) -> None:
    direct.create_segment(name)
    direct.append(name, b"abc")
    proxy.drop_response(":read", times=2)
    assert flaky.read(name, 0).data == b"abc"
    proxy.drop_response(":seal")
    assert flaky.seal(name).sealed
    assert len(_sent(proxy, "read")) == 3 and len(_sent(proxy, "seal")) == 2


def _unavailable(retry_after_ms: int | None = None) -> bytes:
    error: dict[str, object] = {"code": "container_unavailable", "message": "recovering"}
    error["container"] = 1
    if retry_after_ms is not None:
        error["retry_after_ms"] = retry_after_ms
    return json.dumps({"error": error}).encode()


def test_503_is_retried_after_the_time_the_server_asks(
    proxy: FlakyProxy, flaky: SegmentStoreClient, direct: SegmentStoreClient, name: str
) -> None:
    direct.create_segment(name)
    proxy.answer(":append", 503, _unavailable(300), "retry-after: 1\r\n")
    begun = time.monotonic()
    result = flaky.append(name, b"x", writer_id="w", writer_seq=0)
    waited = time.monotonic() - begun
    assert result.offset == 0 and not result.duplicate
    assert 0.3 <= waited < 0.9  # the body's retry_after_ms is more precise than the header

    # Without retry_after_ms in the body, the Retry-After header (whole seconds) rules.
    proxy.answer(
        ":read", 429, b'{"error": {"code": "throttled", "message": "x"}}', "retry-after: 1\r\n"
    )
    begun = time.monotonic()
    assert flaky.read(name, 0).data == b"x"
    assert time.monotonic() - begun >= 1.0


def test_503_on_a_request_that_is_not_idempotent_is_raised(
    proxy: FlakyProxy, flaky: SegmentStoreClient, name: str
) -> None:
    proxy.answer(":append", 503, _unavailable(10))
    with pytest.raises(e.ContainerUnavailableError) as unavailable:
        flaky.append(name, b"x")  # no writer id: the store might have applied it
    assert unavailable.value.container == 1 and unavailable.value.retry_after_ms == 10
    proxy.answer(" /v1/segments/", 503, _unavailable(10))
    with pytest.raises(e.ContainerUnavailableError):
        flaky.create_segment(name)
    assert len(_sent(proxy, "append")) == 1
    assert sum(head.startswith("PUT ") for head in proxy.requests) == 1


def test_retries_stop_after_max_attempts(proxy: FlakyProxy, name: str) -> None:
    policy = RetryPolicy(max_attempts=3, initial_backoff_s=0.01, max_backoff_s=0.01)
    proxy.answer(":attributes", 503, _unavailable(5), times=10)
    with (
        SegmentStoreClient(proxy.url, retry=policy) as client,
        pytest.raises(e.ContainerUnavailableError),
    ):
        client.get_attributes(name)
    assert len(_sent(proxy, "attributes")) == 3


def test_retries_stop_at_the_deadline(proxy: FlakyProxy, name: str) -> None:
    policy = RetryPolicy(max_attempts=100, deadline_s=0.5)
    proxy.answer(":attributes", 503, _unavailable(2000), times=10)
    with SegmentStoreClient(proxy.url, retry=policy) as client:
        begun = time.monotonic()
        with pytest.raises(e.ContainerUnavailableError):
            client.get_attributes(name)
        # A wait that would pass the deadline is not started.
        assert time.monotonic() - begun < 0.5
    assert len(_sent(proxy, "attributes")) == 1


def test_a_refused_connection_is_retried_for_any_request(live: LiveServer, name: str) -> None:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]  # free now; nothing listens there until the proxy does
    late: list[FlakyProxy] = []

    def start_late() -> None:
        time.sleep(0.4)
        late.append(FlakyProxy(live.port, listen_port=port))

    starter = threading.Thread(target=start_late)
    starter.start()
    policy = RetryPolicy(max_attempts=50, initial_backoff_s=0.02, max_backoff_s=0.1)
    try:
        with SegmentStoreClient(f"http://127.0.0.1:{port}", retry=policy) as client:
            # A create is not idempotent, but a connection never made sent nothing.
            assert client.create_segment(name).name == name
    finally:
        starter.join()
        for proxy in late:
            proxy.close()


def test_retry_after_comes_from_the_body_then_the_header() -> None:
    body = b'{"error": {"code": "throttled", "message": "x", "retry_after_ms": 250}}'
    assert retry_after_s(httpx.Response(429, content=body, headers={"Retry-After": "3"})) == 0.25
    assert retry_after_s(httpx.Response(503, content=b"{}", headers={"Retry-After": "3"})) == 3
    in_a_minute = email.utils.formatdate(time.time() + 60, usegmt=True)
    from_date = retry_after_s(httpx.Response(503, headers={"Retry-After": in_a_minute}))
    assert from_date is not None and 55 < from_date <= 60
    assert retry_after_s(httpx.Response(503, headers={"Retry-After": "soon"})) is None
    assert retry_after_s(httpx.Response(503)) is None
