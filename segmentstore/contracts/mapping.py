"""Segment name -> segment container mapping, bit-for-bit the same as Pravega's.

This module owns the one decision of which container a segment lives in (docs/architecture.md,
the parts). It has to give the same container number as Pravega's
``io.pravega.shared.segment.SegmentToContainerMapper`` for the same name and container count, so
that data, tooling and operators' expectations carry over between the two systems. Pravega does:

1. map a transaction segment to its parent: everything from the first ``#transaction.`` on is
   dropped (so a transaction lands in the same container as the segment it merges into);
2. hash the name with Guava's ``Hashing.murmur3_128(seed).hashUnencodedChars(name)``, where the
   seed is ``"SegmentToContainerMapper".hashCode()`` == 1661405012 and "unencoded chars" means
   the string's UTF-16 code units, each fed little-endian -- i.e. ``name.encode("utf-16-le")``;
3. reduce the 128-bit ``HashCode`` to a long with ``asLong()`` (first 8 digest bytes,
   little-endian, signed) and pick the bucket with Guava's ``Hashing.consistentHash``.

Everything here is written out in pure Python with Java's 64-bit wraparound and ``int`` casts
reproduced exactly, so no JVM or native extension is needed:

* :func:`murmur3_x64_128` -- MurmurHash3 x64 128-bit, digest laid out as Guava's
  ``HashCode.asBytes()`` (h1 then h2, each little-endian);
* :func:`consistent_hash` -- Guava's LCG-driven jump consistent hash;
* :func:`container_of` -- the composition above, memoised because it is on the append hot path.

The container count must never change for a deployment: :func:`consistent_hash` keeps most names
where they were when buckets grow, but not all of them.
"""

from __future__ import annotations

import functools
import struct

__all__ = [
    "CONTAINER_HASH_SEED",
    "TRANSACTION_DELIMITER",
    "consistent_hash",
    "container_of",
    "murmur3_x64_128",
]

#: Pravega's ``HashHelper.seededWith("SegmentToContainerMapper")``: Java's
#: ``"SegmentToContainerMapper".hashCode()``.
CONTAINER_HASH_SEED = 1661405012

#: Pravega's ``NameUtils.TRANSACTION_DELIMITER``.
TRANSACTION_DELIMITER = "#transaction."

_MASK64 = 0xFFFF_FFFF_FFFF_FFFF
_JAVA_INT_MIN = -(2**31)
_JAVA_INT_MAX = 2**31 - 1
_JAVA_LONG_MIN = -(2**63)

# MurmurHash3 x64 128 constants.
_C1 = 0x87C3_7B91_1142_53D5
_C2 = 0x4CF5_AD43_2745_937F
_FMIX_M1 = 0xFF51_AFD7_ED55_8CCD
_FMIX_M2 = 0xC4CE_B9FE_1A85_EC53

# Guava's LinearCongruentialGenerator multiplier, and 0x1.0p31.
_LCG_MULTIPLIER = 2862933555777941757
_TWO_POW_31 = float(2**31)

_BLOCKS = struct.Struct("<QQ")


def _rotl64(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _MASK64


def _fmix64(k: int) -> int:
    k ^= k >> 33
    k = (k * _FMIX_M1) & _MASK64
    k ^= k >> 33
    k = (k * _FMIX_M2) & _MASK64
    k ^= k >> 33
    return k


def _mix_k1(k1: int) -> int:
    return (_rotl64((k1 * _C1) & _MASK64, 31) * _C2) & _MASK64


def _mix_k2(k2: int) -> int:
    return (_rotl64((k2 * _C2) & _MASK64, 33) * _C1) & _MASK64


def murmur3_x64_128(data: bytes, seed: int) -> bytes:
    """MurmurHash3 x64 128-bit of ``data``, as Guava's ``Hashing.murmur3_128(seed)`` gives it.

    Returns the 16-byte digest in Guava's ``HashCode.asBytes()`` order: h1 then h2, each
    little-endian (the same bytes as the reference C++ ``MurmurHash3_x64_128`` output buffer).

    ``seed`` is a Java ``int`` (``-2**31 <= seed < 2**31``) and, as in Guava, is sign-extended to
    64 bits for h1/h2. For non-negative seeds this equals the reference implementation (which
    zero-extends a ``uint32_t``); negative seeds follow Guava.
    """
    if not _JAVA_INT_MIN <= seed <= _JAVA_INT_MAX:
        raise ValueError(f"seed must be a Java int (32-bit signed), got {seed}")
    h1 = h2 = seed & _MASK64
    length = len(data)
    n_body = length - (length % 16)

    # The mixing steps are written out rather than called: every new segment name is hashed
    # once, and a call per step doubled the cost.
    m = _MASK64
    c1, c2 = _C1, _C2
    for k1, k2 in _BLOCKS.iter_unpack(data[:n_body]):
        k1 = (k1 * c1) & m
        k1 = (((k1 << 31) | (k1 >> 33)) & m) * c2 & m
        h1 ^= k1
        h1 = ((h1 << 27) | (h1 >> 37)) & m
        h1 = ((h1 + h2) * 5 + 0x52DC_E729) & m
        k2 = (k2 * c2) & m
        k2 = (((k2 << 33) | (k2 >> 31)) & m) * c1 & m
        h2 ^= k2
        h2 = ((h2 << 31) | (h2 >> 33)) & m
        h2 = ((h2 + h1) * 5 + 0x3849_5AB5) & m

    tail = data[n_body:]
    if len(tail) > 8:
        h2 ^= _mix_k2(int.from_bytes(tail[8:], "little"))
    if tail:
        h1 ^= _mix_k1(int.from_bytes(tail[:8], "little"))

    h1 ^= length
    h2 ^= length
    h1 = (h1 + h2) & m
    h2 = (h2 + h1) & m
    h1 = _fmix64(h1)
    h2 = _fmix64(h2)
    h1 = (h1 + h2) & m
    h2 = (h2 + h1) & m
    return h1.to_bytes(8, "little") + h2.to_bytes(8, "little")


def _java_double_to_int(x: float) -> int:
    """Java's ``(int) x`` narrowing: truncate toward zero, saturate, NaN -> 0."""
    if x != x:  # NaN
        return 0
    if x >= _JAVA_INT_MAX:
        return _JAVA_INT_MAX
    if x <= _JAVA_INT_MIN:
        return _JAVA_INT_MIN
    return int(x)


def consistent_hash(h: int, buckets: int) -> int:
    """Guava's ``Hashing.consistentHash(long input, int buckets)``: a bucket in ``[0, buckets)``.

    ``h`` is a Java ``long``; either its signed or its unsigned 64-bit value is accepted (they
    give the same result). ``buckets`` must be a positive Java ``int``. Growing ``buckets`` from
    ``n`` to ``n + 1`` moves a key only into the new bucket ``n`` (about ``1/(n+1)`` of them).
    """
    if not _JAVA_LONG_MIN <= h <= _MASK64:
        raise ValueError(f"h must be a 64-bit integer, got {h}")
    if not 0 < buckets <= _JAVA_INT_MAX:
        raise ValueError(f"buckets must be a positive 32-bit int, got {buckets}")
    state = h & _MASK64  # LinearCongruentialGenerator(input)
    candidate = 0
    while True:
        # nextDouble(): state = 2862933555777941757L * state + 1 (wrapping), then
        # ((double) ((int) (state >>> 33) + 1)) / 0x1.0p31. (state >>> 33) < 2**31 always fits,
        # but the "+ 1" is int arithmetic: 2**31 - 1 + 1 wraps to -2**31, giving -1.0.
        state = (_LCG_MULTIPLIER * state + 1) & _MASK64
        numerator = (state >> 33) + 1
        if numerator > _JAVA_INT_MAX:
            numerator = _JAVA_INT_MIN
        next_double = numerator / _TWO_POW_31
        # candidate + 1 <= buckets <= Integer.MAX_VALUE, so that int addition never wraps.
        nxt = _java_double_to_int((candidate + 1) / next_double)
        if 0 <= nxt < buckets:
            candidate = nxt
        else:
            return candidate


def _as_long(digest: bytes) -> int:
    """Guava's ``HashCode.asLong()``: the first 8 bytes, little-endian, signed."""
    return int.from_bytes(digest[:8], "little", signed=True)


@functools.lru_cache(maxsize=4096)  # small, as segmentstore.store._route's (it says why)
def container_of(name: str, containers: int) -> int:
    """The container (``0 <= c < containers``) that owns segment ``name``, as in Pravega.

    A transaction segment (``NAME#transaction.<id>``) maps to the container of ``NAME``.
    """
    cut = name.find(TRANSACTION_DELIMITER)
    if cut >= 0:
        name = name[:cut]
    # Java strings are UTF-16 code unit sequences and may hold unpaired surrogates;
    # "surrogatepass" feeds those through as Java would instead of raising.
    digest = murmur3_x64_128(name.encode("utf-16-le", "surrogatepass"), CONTAINER_HASH_SEED)
    return consistent_hash(_as_long(digest), containers)
