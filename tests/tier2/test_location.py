"""Tier 2 URIs: which backend and location each names, and which are refused."""

from __future__ import annotations

import os

import pytest

from segmentstore.tier2 import InvalidTier2UriError, Tier2UnavailableError, open_chunk_storage
from segmentstore.tier2.location import Tier2Location


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("file:///var/data/tier2", Tier2Location("file", "", 0, "/var/data/tier2")),
        ("file:///var/data/tier2/", Tier2Location("file", "", 0, "/var/data/tier2")),
        ("file://localhost/var/x", Tier2Location("file", "", 0, "/var/x")),
        ("/var/data/../tier2", Tier2Location("file", "", 0, "/var/tier2")),
        ("s3://bucket", Tier2Location("s3", "bucket", 0, "")),
        ("s3://bucket/", Tier2Location("s3", "bucket", 0, "")),
        ("s3://my.bucket-1/a/b/", Tier2Location("s3", "my.bucket-1", 0, "a/b")),
        ("hdfs://namenode:9000/tier2", Tier2Location("hdfs", "namenode", 9000, "/tier2")),
        ("hdfs://namenode", Tier2Location("hdfs", "namenode", 8020, "/")),
        ("hdfs://nn/a/../b/", Tier2Location("hdfs", "nn", 8020, "/b")),
    ],
)
def test_locations(uri: str, expected: Tier2Location) -> None:
    assert Tier2Location.parse(uri) == expected


def test_relative_paths_are_made_absolute() -> None:
    cwd = os.getcwd()
    assert Tier2Location.parse("data/tier2").path == f"{cwd}/data/tier2"
    assert Tier2Location.parse("file://./data/tier2").path == f"{cwd}/data/tier2"


def test_the_normalised_uri() -> None:
    for uri in ("file:///x/y", "s3://bucket", "s3://bucket/p/q", "hdfs://nn:8020/t"):
        assert Tier2Location.parse(uri).uri == uri


@pytest.mark.parametrize(
    "uri",
    [
        "",
        "ftp://host/x",
        "file://otherhost/x",
        "file:relative",
        "s3://",
        "s3://Upper-Case",
        "s3://ab",
        "s3://bucket/../escape",
        "s3://bucket/a//b",
        "s3://key:secret@bucket/p",
        "s3://bucket/p?versioning=1",
        "hdfs:///no/host",
        "hdfs://nn:notaport/x",
    ],
)
def test_invalid_uris(uri: str) -> None:
    with pytest.raises(InvalidTier2UriError) as caught:
        open_chunk_storage(uri)
    assert caught.value.uri == uri


def test_file_takes_no_options(tmp_path: object) -> None:
    with pytest.raises(InvalidTier2UriError):
        open_chunk_storage(f"file://{tmp_path}", options={"endpoint_url": "http://x"})


def test_hdfs_without_libhdfs_is_unavailable_and_says_why() -> None:
    try:
        storage = open_chunk_storage("hdfs://127.0.0.1:1/tier2")
    except Tier2UnavailableError as e:
        assert e.uri == "hdfs://127.0.0.1:1/tier2"
        assert "libhdfs" in e.reason or "ConnectException" in e.reason or "refused" in e.reason
        assert not isinstance(e.__cause__, Tier2UnavailableError)
    else:
        storage.close()
        pytest.fail("opened HDFS on port 1")
