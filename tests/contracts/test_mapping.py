"""Segment -> container mapping must agree with Pravega (Guava murmur3_128 + consistentHash)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from segmentstore.contracts.mapping import (
    CONTAINER_HASH_SEED,
    consistent_hash,
    container_of,
    murmur3_x64_128,
)

# Pravega's own answers: name -> container for 4 / 16 / 100 containers.
PRAVEGA_VECTORS = [
    ("scope/stream/0", (3, 3, 65)),
    ("scope/stream/1", (3, 15, 73)),
    ("myScope/myStream/3", (1, 1, 38)),
    ("segment", (3, 11, 28)),
    ("foo", (3, 6, 29)),
    ("a", (0, 14, 21)),
]


@pytest.mark.parametrize(("name", "expected"), PRAVEGA_VECTORS)
def test_check_vectors(name: str, expected: tuple[int, int, int]) -> None:
    assert tuple(container_of(name, n) for n in (4, 16, 100)) == expected


def test_seed_is_pravega_mapper_name_hash_code() -> None:
    # HashHelper.seededWith("SegmentToContainerMapper") uses String.hashCode() as the seed.
    h = 0
    for ch in "SegmentToContainerMapper":
        h = (31 * h + ord(ch)) & 0xFFFF_FFFF
    assert h == CONTAINER_HASH_SEED


@pytest.mark.parametrize("name", [n for n, _ in PRAVEGA_VECTORS])
@pytest.mark.parametrize("containers", [1, 4, 5, 16, 100, 1024])
def test_transaction_maps_to_parent_container(name: str, containers: int) -> None:
    txn = f"{name}#transaction.00000000000000000000000000000001"
    assert container_of(txn, containers) == container_of(name, containers)
    # Everything from the first delimiter on is dropped.
    nested = f"{name}#transaction.abc#transaction.def"
    assert container_of(nested, containers) == container_of(name, containers)


def _unstripped_container(name: str, containers: int) -> int:
    digest = murmur3_x64_128(name.encode("utf-16-le"), CONTAINER_HASH_SEED)
    return consistent_hash(int.from_bytes(digest[:8], "little", signed=True), containers)


def test_transaction_strip_is_not_vacuous() -> None:
    # Hashed whole, transaction names would scatter; the strip is what keeps them together.
    assert _unstripped_container("foo", 100) == container_of("foo", 100)
    txns = [f"foo#transaction.{i:032x}" for i in range(20)]
    assert {_unstripped_container(t, 100) for t in txns} != {container_of("foo", 100)}
    assert {container_of(t, 100) for t in txns} == {container_of("foo", 100)}


def test_container_in_range_and_cached() -> None:
    for i in range(500):
        assert 0 <= container_of(f"scope/stream/{i}", 7) < 7
    assert container_of("anything", 1) == 0
    # Small: a name cached pins objects where the heap was when it was seen (store._route).
    assert container_of.cache_info().maxsize == 4096


def test_non_ascii_names_hash_utf16_code_units() -> None:
    # A supplementary character is two UTF-16 code units in Java; a lone surrogate is legal in a
    # Java String and must not raise here either.
    assert 0 <= container_of("scope/\U0001f600/0", 16) < 16
    assert 0 <= container_of("scope/\ud800/0", 16) < 16
    digest = murmur3_x64_128("\U0001f600".encode("utf-16-le"), CONTAINER_HASH_SEED)
    assert digest == murmur3_x64_128(b"\x3d\xd8\x00\xde", CONTAINER_HASH_SEED)


@pytest.mark.parametrize("containers", [0, -1, 2**31])
def test_container_count_must_be_positive_java_int(containers: int) -> None:
    with pytest.raises(ValueError):
        container_of("scope/stream/0", containers)


# --- consistent_hash -------------------------------------------------------------------------

# Guava HashingTest.testConsistentHash_linearCongruentialGeneratorCompatibility.
GUAVA_GOLDEN_100 = [0, 55, 62, 8, 45, 59, 86, 97, 82, 59, 73, 37, 17, 56, 86, 21, 90, 37, 38, 83]


def test_consistent_hash_guava_golden_values() -> None:
    assert [consistent_hash(i, 100) for i in range(20)] == GUAVA_GOLDEN_100
    assert consistent_hash(10863919174838991, 11) == 6
    assert consistent_hash(2016238256797177309, 11) == 3
    assert consistent_hash(1673758223894951030, 11) == 5
    assert consistent_hash(2, 100001) == 80343
    assert consistent_hash(2201, 100001) == 22152
    assert consistent_hash(2202, 100001) == 15018


def test_consistent_hash_signed_and_unsigned_long_agree() -> None:
    # Guava HashingTest.testConsistentHash_ofHashCode uses 0x9999999999999999L.
    unsigned = 0x9999_9999_9999_9999
    assert consistent_hash(unsigned, 5555) == consistent_hash(unsigned - 2**64, 5555)


def test_consistent_hash_java_int_overflow_in_next_double() -> None:
    # Pick the input whose first LCG step yields state == 2**64 - 1, so (int)(state >>> 33) is
    # Integer.MAX_VALUE and "+ 1" wraps to Integer.MIN_VALUE: nextDouble() == -1.0, the first
    # candidate is negative and Java returns bucket 0. Without the wrap nextDouble() would be
    # 1.0 and the first jump would go to bucket 1.
    multiplier = 2862933555777941757
    seed = ((2**64 - 1) - 1) * pow(multiplier, -1, 2**64) % 2**64
    assert (multiplier * seed + 1) % 2**64 == 2**64 - 1
    assert consistent_hash(seed, 100) == 0
    assert consistent_hash(seed, 2**31 - 1) == 0


@pytest.mark.parametrize("buckets", [0, -5, 2**31])
def test_consistent_hash_rejects_bad_bucket_count(buckets: int) -> None:
    with pytest.raises(ValueError):
        consistent_hash(5, buckets)


@pytest.mark.parametrize("h", [2**64, -(2**63) - 1])
def test_consistent_hash_rejects_non_64_bit_input(h: int) -> None:
    with pytest.raises(ValueError):
        consistent_hash(h, 4)


def test_growing_from_4_to_5_containers_moves_few_names_and_only_to_the_new_one() -> None:
    names = [f"scope{i % 7}/stream{i % 13}/{i}" for i in range(5000)]
    moved = 0
    for name in names:
        before, after = container_of(name, 4), container_of(name, 5)
        if before != after:
            moved += 1
            assert after == 4, name
    # Expected 1/5 of the keys; a modulo mapping would move about 4/5.
    assert 0.15 * len(names) < moved < 0.25 * len(names)


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1), st.integers(1, 300))
def test_jump_property(h: int, buckets: int) -> None:
    before = consistent_hash(h, buckets)
    after = consistent_hash(h, buckets + 1)
    assert 0 <= before < buckets
    assert after in (before, buckets)


# --- murmur3_x64_128 -------------------------------------------------------------------------


def _guava_bytes(h1: int, h2: int) -> bytes:
    return h1.to_bytes(8, "little") + h2.to_bytes(8, "little")


# Guava Murmur3Hash128Test.testKnownValues (the C++ reference values): seed, h1, h2, input.
GUAVA_KNOWN = [
    (0, 0x629942693E10F867, 0x92DB0B82BAEB5347, b"hell"),
    (1, 0xA78DDFF5ADAE8D10, 0x128900EF20900135, b"hello"),
    (2, 0x8A486B23F422E826, 0xF962A2C58947765F, b"hello "),
    (3, 0x2EA59F466F6BED8C, 0xC610990ACC428A17, b"hello w"),
    (4, 0x79F6305A386C572C, 0x46305AED3483B94E, b"hello wo"),
    (5, 0xC2219D213EC1F1B5, 0xA1D8E2E0A52785BD, b"hello wor"),
    (0, 0xE34BBC7BBC071B6C, 0x7A433CA9C49A9347, b"The quick brown fox jumps over the lazy dog"),
    (0, 0x658CA970FF85269A, 0x43FEE3EAA68E5C3E, b"The quick brown fox jumps over the lazy cog"),
]


@pytest.mark.parametrize(("seed", "h1", "h2", "data"), GUAVA_KNOWN)
def test_murmur3_guava_known_values(seed: int, h1: int, h2: int, data: bytes) -> None:
    assert murmur3_x64_128(data, seed) == _guava_bytes(h1, h2)


def test_murmur3_guava_hash_code_string() -> None:
    # Guava: murmur3_128(0).hashString(fox, UTF_8).toString() == "6c1b07bc...".
    fox = b"The quick brown fox jumps over the lazy dog"
    assert murmur3_x64_128(fox, 0).hex() == "6c1b07bc7bbc4be347939ac4a93c437a"


# Observed with the mmh3 package (mmh3.hash_bytes(data, 1661405012), mmh3 5.3.1), covering an
# empty input, tail-only, exact block, block + tail and many blocks with Pravega's seed.
MMH3_OBSERVED = [
    (b"", "b10e41e17e3655fc14ed4856f2c1f95a"),
    ("a".encode("utf-16-le"), "3826c9036d803fd153f8e659ad69db10"),
    (b"0123456789abcdef", "168bab141b65f56ee82d77297cef1909"),
    ("scope/stream/0".encode("utf-16-le"), "19179c010efa242fabb72f314c28ce34"),
    (b"The quick brown fox jumps over the lazy dog", "8ddb14c8e2660e70758490ac526289dc"),
    (bytes(range(256)), "ebb32df0b3f9ff5513faa3a91a948f5d"),
]


@pytest.mark.parametrize(("data", "digest"), MMH3_OBSERVED)
def test_murmur3_with_pravega_seed(data: bytes, digest: str) -> None:
    assert murmur3_x64_128(data, CONTAINER_HASH_SEED).hex() == digest


@pytest.mark.parametrize("seed", [-(2**31) - 1, 2**31])
def test_murmur3_seed_is_java_int(seed: int) -> None:
    with pytest.raises(ValueError):
        murmur3_x64_128(b"x", seed)
