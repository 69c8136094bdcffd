"""Error answers come back as the store's own exception leaves, fields filled in."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from error_samples import samples

import segmentstore.contracts.errors as e
from segmentstore.api.errors import error_response
from segmentstore.client import RetryPolicy, SegmentStoreClient
from segmentstore.client.errors import error_from_response
from segmentstore.containers.status import ContainerStatus
from segmentstore.contracts.errors import SegmentStoreError, leaf_error_classes
from segmentstore.tier1 import DataLogCorruptionError

from .conftest import FlakyProxy, LiveServer

SAMPLES = samples()  # one of each leaf, built from the classes


@pytest.mark.parametrize("sent", SAMPLES, ids=lambda error: type(error).__name__)
def test_every_leaf_round_trips_through_the_wire_format(sent: SegmentStoreError) -> None:
    rendered = error_response(sent)  # the server's one mapping
    response = httpx.Response(rendered.status_code, content=bytes(rendered.body))
    received = error_from_response(response, {"name": "s", "container": 7})
    assert type(received) is type(sent)
    assert received.code == sent.code and received.message == sent.message
    assert received.fields() == sent.fields()
    assert str(received) == str(sent)
    for attribute in ("name", "container"):
        if hasattr(sent, attribute):
            assert getattr(received, attribute) == getattr(sent, attribute)


def test_the_samples_cover_every_leaf() -> None:
    assert {type(s) for s in SAMPLES} == set(leaf_error_classes())


@pytest.fixture
def client(live: LiveServer) -> Iterator[SegmentStoreClient]:
    with SegmentStoreClient(live.url) as store:
        yield store


def test_segment_errors_from_a_real_server(client: SegmentStoreClient, name: str) -> None:
    with pytest.raises(e.InvalidNameError):
        client.create_segment("a//b")
    with pytest.raises(e.InvalidNameError):
        client.get_info("../x")  # sent as %2E%2E, not resolved away by httpx
    with pytest.raises(e.SegmentNotFoundError) as missing:
        client.get_info(name)
    assert missing.value.name == name
    client.create_segment(name)
    with pytest.raises(e.SegmentExistsError) as exists:
        client.create_segment(name)
    assert exists.value.name == name
    with pytest.raises(e.InvalidArgumentError):
        client.append(name, b"")
    client.append(name, b"0123456789")
    with pytest.raises(e.BadOffsetError) as bad_offset:
        client.append(name, b"x", expected_offset=3)
    assert (bad_offset.value.expected_offset, bad_offset.value.length) == (3, 10)
    assert bad_offset.value.fields() == {"expected_offset": 3, "length": 10}
    with pytest.raises(e.OffsetBeyondEndError) as beyond:
        client.truncate(name, 11)
    assert (beyond.value.offset, beyond.value.length) == (11, 10)
    client.truncate(name, 4)
    with pytest.raises(e.SegmentTruncatedError) as truncated:
        client.read(name, 0)
    assert truncated.value.start_offset == 4
    with pytest.raises(e.PayloadTooLargeError) as too_large:
        client.append(name, b"x" * (8 * 1024 * 1024 + 1))
    assert too_large.value.limit == 8 * 1024 * 1024
    client.seal(name)
    with pytest.raises(e.SegmentSealedError):
        client.append(name, b"x")
    with pytest.raises(e.EndOfSegmentError) as end:
        client.read(name, 10)
    assert end.value.length == 10


def test_merge_of_a_truncated_source(client: SegmentStoreClient, name: str) -> None:
    client.create_segment(name)
    transaction = client.begin_transaction(name)
    client.append(transaction, b"abc")
    client.truncate(transaction, 1)
    with pytest.raises(e.SegmentTruncatedError) as truncated:
        client.merge(name, transaction)
    assert truncated.value.start_offset == 1


def test_attribute_and_event_errors(client: SegmentStoreClient, name: str) -> None:
    client.create_segment(name, attributes={"k": 1})
    with pytest.raises(e.BadAttributeUpdateError) as bad:
        client.update_attributes(name, [{"key": "k", "value": 2, "type": "replace_if_absent"}])
    assert bad.value.key == "k"
    with pytest.raises(e.InvalidEventsError):
        client.append_events(name, b"\0\0\0\x01\0\0\0\0")  # type 1


def test_container_errors(live: LiveServer, client: SegmentStoreClient) -> None:
    with pytest.raises(e.ContainerNotFoundError) as missing:
        client.restart_container(99)
    assert missing.value.container == 99
    container = live.store.containers[1]
    container.status = ContainerStatus.OFFLINE  # as a corrupt Tier 1 would leave it
    # A permanent failure, so that the supervisor does not recover it under the test.
    container.failure_error = DataLogCorruptionError("tier1", 0, "injected")
    try:
        assert not client.readyz()
        # "myScope/myStream/3" lives in container 1 of 4. A create is not retried on 503.
        with pytest.raises(e.ContainerUnavailableError) as unavailable:
            client.create_segment("myScope/myStream/3")
        assert unavailable.value.container == 1
        assert unavailable.value.retry_after_ms > 0
    finally:
        assert client.restart_container(1).status == "running"
    assert client.readyz()


def test_auth_errors(secured: LiveServer, name: str) -> None:
    with SegmentStoreClient(secured.url) as anonymous, pytest.raises(e.UnauthorizedError):
        anonymous.list_segments()
    with (
        SegmentStoreClient(secured.url, token="nope") as unknown,
        pytest.raises(e.UnauthorizedError),
    ):
        unknown.list_segments()
    with SegmentStoreClient(secured.url, token="read-token") as reader:
        with pytest.raises(e.ForbiddenError):
            reader.create_segment(name)
        with pytest.raises(e.ForbiddenError):
            reader.restart_container(0)
        assert reader.healthz()  # probes are never behind auth


def test_throttled_and_unknown_answers(proxy: FlakyProxy, name: str) -> None:
    with SegmentStoreClient(proxy.url, retry=RetryPolicy.never()) as client:
        body = {"error": {"code": "throttled", "message": "slow down", "retry_after_ms": 1500}}
        proxy.answer(":read", 429, json.dumps(body).encode(), "retry-after: 2\r\n")
        with pytest.raises(e.ThrottledError) as throttled:
            client.read(name, 0)
        assert throttled.value.retry_after_ms == 1500
        assert throttled.value.message == "slow down"

        teapot = {"error": {"code": "teapot", "message": "short and stout", "extra": 1}}
        proxy.answer(":read", 418, json.dumps(teapot).encode())
        with pytest.raises(SegmentStoreError) as unknown:
            client.read(name, 0)
        assert type(unknown.value) is SegmentStoreError
        assert (unknown.value.code, unknown.value.message) == ("teapot", "short and stout")

        proxy.answer(":read", 502, b"<html>bad gateway</html>")
        with pytest.raises(SegmentStoreError) as gateway:
            client.read(name, 0)
        assert type(gateway.value) is SegmentStoreError
        assert gateway.value.code == "http_502" and "bad gateway" in gateway.value.message
