"""What the S3 adapter does beyond the contract: its layout in the bucket, multipart uploads,
options, and the translation of every SDK failure into a Tier 2 error."""

from __future__ import annotations

import http.server
import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import boto3
import pytest

from segmentstore.tier2 import (
    ChunkExistsError,
    ChunkStorage,
    InvalidTier2UriError,
    Tier2Error,
    Tier2IOError,
    Tier2UnavailableError,
    open_chunk_storage,
)
from segmentstore.tier2.s3_storage import S3Options

if TYPE_CHECKING:
    from conftest import MotoServer

pytestmark = pytest.mark.s3

MIB = 1024 * 1024
Options = Callable[..., dict[str, Any]]


@pytest.fixture
def uri() -> str:
    return f"s3://tier2-tests/{uuid.uuid4().hex}"


@pytest.fixture
def raw(moto_endpoint: str) -> Any:
    """A plain boto3 client, to look at the bucket behind the adapter's back."""
    client = boto3.session.Session().client(
        "s3",
        endpoint_url=moto_endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    yield client
    client.close()


@pytest.fixture
def s3(uri: str, moto_endpoint: str, s3_options: Options) -> Iterator[ChunkStorage]:
    storage = open_chunk_storage(uri, options=s3_options(moto_endpoint))
    yield storage
    storage.close()


def every_operation(storage: ChunkStorage) -> dict[str, Callable[[], object]]:
    return {
        "create": lambda: storage.create("new", [b"x"]),
        "create multipart": lambda: storage.create("big", [bytes(9 * MIB)]),
        "read": lambda: storage.read("k", 0, 1),
        "size": lambda: storage.size("k"),
        "exists": lambda: storage.exists("k"),
        "list": lambda: storage.list(""),
        "delete": lambda: storage.delete("k"),
        "get": lambda: storage.get("k"),
        "put_if": lambda: storage.put_if("m", b"x", None),
    }


def test_objects_sit_under_the_prefix_without_directory_markers(
    s3: ChunkStorage, uri: str, raw: Any
) -> None:
    s3.create("segments/abc/chunk-1", [b"x"])
    s3.put_if("segments/abc/manifest.json", b"{}", None)
    s3.create("segments/abd/chunk-1", [b"y"])
    s3.delete("segments/abd/chunk-1")
    prefix = uri.removeprefix("s3://tier2-tests/")
    listed = raw.list_objects_v2(Bucket="tier2-tests", Prefix=prefix)
    assert [o["Key"] for o in listed["Contents"]] == [
        f"{prefix}/segments/abc/chunk-1",
        f"{prefix}/segments/abc/manifest.json",
    ]


def test_version_tokens_are_etags(s3: ChunkStorage, uri: str, raw: Any) -> None:
    version = s3.put_if("m", b"document", None)
    prefix = uri.removeprefix("s3://tier2-tests/")
    assert raw.head_object(Bucket="tier2-tests", Key=f"{prefix}/m")["ETag"] == version


def test_large_objects_are_exclusive_multipart_uploads(
    s3: ChunkStorage, uri: str, raw: Any
) -> None:
    data = bytes(range(256)) * (9 * MIB // 256)
    s3.create("big", [data])
    prefix = uri.removeprefix("s3://tier2-tests/")
    assert raw.head_object(Bucket="tier2-tests", Key=f"{prefix}/big")["ETag"].endswith('-2"')
    with pytest.raises(ChunkExistsError):
        s3.create("big", [bytes(9 * MIB)])
    assert s3.read("big", 0, len(data)) == data
    # The refused upload was aborted, not left to hold its parts.
    uploads = raw.list_multipart_uploads(Bucket="tier2-tests", Prefix=prefix)
    assert uploads.get("Uploads", []) == []


def test_a_missing_bucket_is_named_in_the_error(moto_endpoint: str, s3_options: Options) -> None:
    options = s3_options(moto_endpoint, create_bucket=False)
    storage = open_chunk_storage("s3://no-such-bucket-here", options=options)
    try:
        with pytest.raises(Tier2IOError, match="create_bucket"):
            storage.create("k", [b"x"])
    finally:
        storage.close()


def test_a_stopped_server_is_unavailable_not_an_sdk_error(
    start_moto: Callable[[], MotoServer], s3_options: Options
) -> None:
    server = start_moto()
    storage = open_chunk_storage("s3://doomed/p", options=s3_options(server.endpoint))
    try:
        storage.create("k", [b"x"])
        server.stop()
        for name, operation in every_operation(storage).items():
            with pytest.raises(Tier2UnavailableError) as caught:
                operation()
            assert caught.value.uri == "s3://doomed/p", name
            assert not isinstance(caught.value.__cause__, Tier2Error), name
            assert caught.value.__cause__ is not None, name
    finally:
        storage.close()


def test_a_closed_port_is_unavailable_on_open(s3_options: Options) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        endpoint = f"http://127.0.0.1:{probe.getsockname()[1]}"
    with pytest.raises(Tier2UnavailableError):
        open_chunk_storage("s3://tier2-tests", options=s3_options(endpoint))


class _Refusing(http.server.BaseHTTPRequestHandler):
    """Answers every request with one S3 error."""

    protocol_version = "HTTP/1.1"  # so that a PUT's "Expect: 100-continue" is answered
    status = 503
    code = "SlowDown"

    def _answer(self) -> None:
        if length := int(self.headers.get("Content-Length") or 0):
            self.rfile.read(length)
        body = f"<Error><Code>{self.code}</Code><Message>no</Message></Error>".encode()
        self.send_response(self.status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _answer

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def refusing_endpoint(request: pytest.FixtureRequest) -> Iterator[str]:
    status, code = request.param
    handler = type("Handler", (_Refusing,), {"status": status, "code": code})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.mark.parametrize(
    ("refusing_endpoint", "expected"),
    [
        ((503, "SlowDown"), Tier2UnavailableError),
        ((500, "InternalError"), Tier2UnavailableError),
        ((403, "AccessDenied"), Tier2IOError),
    ],
    indirect=["refusing_endpoint"],
    ids=["503", "500", "403"],
)
def test_refusals_are_translated(
    refusing_endpoint: str, expected: type[Tier2Error], s3_options: Options
) -> None:
    options = s3_options(refusing_endpoint, create_bucket=False)
    storage = open_chunk_storage("s3://refused", options=options)
    try:
        for name, operation in every_operation(storage).items():
            with pytest.raises(Tier2Error) as caught:
                operation()
            assert type(caught.value) is expected, (name, caught.value)
            assert not isinstance(caught.value.__cause__, Tier2Error), name
    finally:
        storage.close()


def test_options_are_checked() -> None:
    for options in (
        {"endpoint": "http://x"},
        {"create_bucket": "maybe"},  # text is parsed: true/false, yes/no, 1/0 only
        {"max_attempts": "many"},
        {"max_attempts": 0},
        {"multipart_part_bytes": MIB},
        {"access_key": "only half"},
        {"endpoint_url": "127.0.0.1:9000"},
        {"connect_timeout_s": True},
    ):
        with pytest.raises(InvalidTier2UriError):
            open_chunk_storage("s3://bucket", options=options)


def test_credentials_stay_out_of_the_options_repr() -> None:
    options = S3Options.parse("s3://b", {"access_key": "AKIDSECRET", "secret_key": "shh"})
    assert "AKIDSECRET" not in repr(options) and "shh" not in repr(options)
