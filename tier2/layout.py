"""Where a segment's objects live in Tier 2 (layout 2).

::

    names/<name code, 4 characters a level>.m                    the segment's manifest
    chunks/<h, 2 digits>/<h>-<start offset, 20 digits>-e<epoch, 10 digits>-s<id, 10 digits>
    chunks/...-s<id>.tidx                                        a chunk's index sidecar

**Manifests by name.** A manifest's key spells its segment's name: each character of the name
becomes two characters of its *code* (``#`` ``-`` ``.`` ``/`` are ``00`` ``01`` ``02`` ``03``,
``0-9 A-Z _ a-z`` are ``1`` and the character itself, ``~`` is ``20``), and the code is cut into
levels of four characters (two of the name). Codes sort as the names do and a name's code
begins with the code of each of its prefixes, so the manifests of the segments whose names
start with ``P`` are exactly the keys that start with ``names/`` and the cut code of ``P``, in
name order: listing by prefix reads what it selects (one S3 listing request per thousand
names; on a file system, the few directories on the way down), never every segment, and a
listing can start after any name. Levels keep every directory below about 4,500 entries. No
name can address anything outside ``names/``: the code has no ``.`` and no ``/`` of its own.

**Chunks by hash.** ``<h>`` is the first 32 hex digits (128 bits) of SHA-256 over the name's
UTF-8 bytes, and ``chunks/`` is spread over 256 directories by its first two: a segment has no
directory of its own (on a file system a directory costs a block, as much as a small segment's
whole chunk). A chunk's key carries the segment offset of its first byte, zero-padded so that
keys sort by offset, the epoch of the container owner that wrote it (a new owner never writes
into a chunk a fenced owner may still be writing) and the incarnation of the name (a new
segment of a deleted name never reuses a key that a merge target may still name). The
manifest repeats the name, so a reader can tell a hash collision from its own segment.
"""

from __future__ import annotations

import hashlib

NAMES_PREFIX = "names/"
CHUNKS_PREFIX = "chunks/"
MANIFEST_SUFFIX = ".m"
TIME_INDEX_SUFFIX = ".tidx"
# The prefix of the earlier layout (one directory per segment, keyed by hash): refused.
LAYOUT_1_PREFIX = "segments/"
_MAX_START_OFFSET = 10**20 - 1
_MAX_EPOCH = 10**10 - 1
_LEVEL = 4  # code characters per level: two characters of the name

# Segment names are made of these 67 characters (contracts.names); in code point order.
_BELOW_DIGITS = "#-./"
_PLAIN = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz"
_CODE = {c: f"0{i}" for i, c in enumerate(_BELOW_DIGITS)} | {c: "1" + c for c in _PLAIN}
_CODE["~"] = "20"
_NAME = {code: c for c, code in _CODE.items()}


def _code(name: str) -> str:
    try:
        return "".join([_CODE[c] for c in name])
    except KeyError as e:
        raise ValueError(f"{name!r} holds a character no segment name has: {e}") from None


def is_spellable(text: str) -> bool:
    """Whether every character of ``text`` may be in a segment name."""
    return all(c in _CODE for c in text)


def longest_spellable_prefix(text: str) -> str:
    """``text`` up to its first character that no segment name has."""
    for i, c in enumerate(text):
        if c not in _CODE:
            return text[:i]
    return text


def _levels(code: str) -> str:
    return "/".join(code[i : i + _LEVEL] for i in range(0, len(code), _LEVEL))


def segment_key(name: str) -> str:
    """``<32 hex digits>``: the hash of ``name`` that its chunk keys begin with."""
    if not name:
        raise ValueError("a segment name is never empty")
    return hashlib.sha256(name.encode("utf-8")).hexdigest()[:32]


def chunks_of(name: str) -> str:
    """The key prefix of every chunk of segment ``name`` (of every incarnation)."""
    h = segment_key(name)
    return f"{CHUNKS_PREFIX}{h[:2]}/{h}-"


def chunk_key(name: str, start_offset: int, epoch: int, segment_id: int = 0) -> str:
    """The key of the chunk of ``name`` that starts at ``start_offset``, written by ``epoch``
    for incarnation ``segment_id`` of the name."""
    if not 0 <= start_offset <= _MAX_START_OFFSET:
        raise ValueError(f"start offset {start_offset} out of range")
    if not 0 <= epoch <= _MAX_EPOCH:
        raise ValueError(f"epoch {epoch} out of range")
    if not 0 <= segment_id <= _MAX_EPOCH:
        raise ValueError(f"segment id {segment_id} out of range")
    return f"{chunks_of(name)}{start_offset:020d}-e{epoch:010d}-s{segment_id:010d}"


def manifest_key(name: str) -> str:
    if not name:
        raise ValueError("a segment name is never empty")
    return NAMES_PREFIX + _levels(_code(name)) + MANIFEST_SUFFIX


def manifests_under(prefix: str) -> str:
    """The key prefix shared by the manifests of exactly the segments whose names start with
    ``prefix`` (``""``: every segment)."""
    return NAMES_PREFIX + _levels(_code(prefix))


def name_of(key: str) -> str | None:
    """The segment whose manifest ``key`` is, or None if ``key`` is not a manifest key."""
    if not key.startswith(NAMES_PREFIX) or not key.endswith(MANIFEST_SUFFIX):
        return None
    levels = key[len(NAMES_PREFIX) : -len(MANIFEST_SUFFIX)].split("/")
    if not levels or any(len(level) != _LEVEL for level in levels[:-1]):
        return None
    code = "".join(levels)
    if not code or len(code) % 2 or len(levels[-1]) not in (2, _LEVEL):
        return None
    name = [_NAME.get(code[i : i + 2]) for i in range(0, len(code), 2)]
    return None if None in name else "".join(name)  # type: ignore[arg-type]


def time_index_key(chunk_key: str) -> str:
    """The index sidecar of a chunk (:mod:`segmentstore.tier2.time_index`)."""
    return chunk_key + TIME_INDEX_SUFFIX


def is_manifest_key(key: str) -> bool:
    """Whether ``key`` is a manifest key (``names/...m``)."""
    return name_of(key) is not None
