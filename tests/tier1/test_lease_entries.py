"""Lease entries carry a member's signature and are refused when replayed too late."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from segmentstore.tier1.jetstream.lease_entries import MAX_STORE_DELAY_MS, decode, encode
from segmentstore.tier1.signing import Signer

SIGNER = Signer(b"0123456789abcdef-secret", "lease entries")
LEASE_MS = 5_000


def now() -> datetime:
    return datetime.now(UTC)


def test_a_members_entry_reads_back() -> None:
    value = encode(SIGNER, "b-cluster", "container.3", {"owner": "n1", "epoch": 4})
    fields = decode(SIGNER, "b-cluster", "container.3", value, now(), LEASE_MS)
    assert fields is not None
    assert (fields["owner"], fields["epoch"]) == ("n1", 4)


@pytest.mark.parametrize(
    ("bucket", "key", "signer"),
    [
        ("b-cluster", "container.4", SIGNER),  # moved to another key
        ("other-cluster", "container.3", SIGNER),  # another deployment's bucket
        ("b-cluster", "container.3", Signer(b"another secret of 16+", "lease entries")),
        ("b-cluster", "container.3", Signer(b"0123456789abcdef-secret", "forwarded requests")),
    ],
)
def test_an_entry_read_elsewhere_or_with_another_key_is_refused(
    bucket: str, key: str, signer: Signer
) -> None:
    value = encode(SIGNER, "b-cluster", "container.3", {"owner": "n1", "epoch": 4})
    assert decode(signer, bucket, key, value, now(), LEASE_MS) is None


@pytest.mark.parametrize(
    "value",
    [
        b"",
        b"not json",
        b"[1, 2]",
        b'{"owner": "evil", "epoch": 9}',
        b'{"owner": "evil", "epoch": 9, "at": 1, "sig": "00"}',
    ],
)
def test_unsigned_or_malformed_entries_are_refused(value: bytes) -> None:
    assert decode(SIGNER, "b-cluster", "container.3", value, now(), LEASE_MS) is None


def test_a_changed_field_breaks_the_signature() -> None:
    value = json.loads(encode(SIGNER, "b-cluster", "node.n1", {"url": "http://a:1"}))
    value["url"] = "http://evil:1"
    forged = json.dumps(value).encode()
    assert decode(SIGNER, "b-cluster", "node.n1", forged, now(), LEASE_MS) is None


def test_an_entry_stored_again_long_after_it_was_made_is_refused() -> None:
    value = encode(SIGNER, "b-cluster", "node.n1", {"url": "http://a:1"})
    window = timedelta(milliseconds=LEASE_MS + MAX_STORE_DELAY_MS)
    soon = now() + window - timedelta(seconds=1)
    late = now() + window + timedelta(seconds=1)
    assert decode(SIGNER, "b-cluster", "node.n1", value, soon, LEASE_MS) is not None
    assert decode(SIGNER, "b-cluster", "node.n1", value, late, LEASE_MS) is None
