"""Errors of Tier 2.

Tier2Error
├── ChunkNotFoundError      no object at that key (or a chunk a manifest names is gone)
├── ChunkExistsError        create() of a key that is already there
├── BadChunkOffsetError     append() at an offset that is not the object's size
├── ChunkRangeError         read() of a range that is not wholly inside the object
├── ChunkCorruptedError     chunk bytes that do not match their checksum, are missing from a
│                           short chunk, or have no checksum: never returned as data
├── ManifestConflictError   a conditional manifest write lost a race: reload and decide again
├── ManifestNotFoundError   a segment has no manifest in this Tier 2 location
├── InvalidManifestError    a manifest document that does not parse or breaks an invariant
├── FencedError             a stale epoch tried to write a manifest: its owner must stop
├── Tier2UnavailableError   the backend is unreachable (connection, timeout, 5xx): retry later
├── Tier2IOError            the backend refused or failed an operation; retrying will not help
├── Tier2ClosedError        the chunk storage was closed
└── InvalidTier2UriError    a Tier 2 URI or option that names no usable location

Adapters translate their backend's errors (``OSError``, ``botocore``, ``pyarrow``) into these,
with the original as ``__cause__``; nothing else escapes the package. A programming error (an
invalid key, a negative offset) is a ``ValueError``.
"""


class Tier2Error(Exception):
    """Root of every Tier 2 error."""


class ChunkNotFoundError(Tier2Error):
    """``segment`` is set when the key was named by that segment's manifest."""

    def __init__(self, key: str, segment: str | None = None) -> None:
        where = f" (named by the manifest of segment {segment!r})" if segment is not None else ""
        super().__init__(f"no Tier 2 object at {key}{where}")
        self.key = key
        self.segment = segment


class ChunkExistsError(Tier2Error):
    def __init__(self, key: str) -> None:
        super().__init__(f"Tier 2 object {key} already exists")
        self.key = key


class BadChunkOffsetError(Tier2Error):
    """Nothing was written: the object is ``expected_offset`` bytes long."""

    def __init__(self, key: str, expected_offset: int, given_offset: int) -> None:
        super().__init__(
            f"append to {key} at offset {given_offset}, but the object is {expected_offset} "
            "bytes long"
        )
        self.key = key
        self.expected_offset = expected_offset
        self.given_offset = given_offset


class ChunkCorruptedError(Tier2Error):
    """Segment bytes ``[start, end)`` of ``chunk`` cannot be proven to be what was written."""

    def __init__(self, segment: str, chunk: str, start: int, end: int, reason: str) -> None:
        super().__init__(
            f"segment {segment!r}: bytes [{start}, {end}) of chunk {chunk} are damaged: {reason}"
        )
        self.segment = segment
        self.chunk = chunk
        self.start = start
        self.end = end
        self.reason = reason


class ChunkRangeError(Tier2Error):
    def __init__(self, key: str, offset: int, length: int, size: int) -> None:
        super().__init__(
            f"range [{offset}, {offset}+{length}) is not inside {key}, which is {size} bytes long"
        )
        self.key = key
        self.offset = offset
        self.length = length
        self.size = size


class ManifestConflictError(Tier2Error):
    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"conditional write of {key} refused: {reason}")
        self.key = key
        self.reason = reason


class ManifestNotFoundError(Tier2Error):
    def __init__(self, segment: str) -> None:
        super().__init__(f"segment {segment!r} has no manifest in Tier 2")
        self.segment = segment


class InvalidManifestError(Tier2Error):
    """``key`` is empty when the document did not come from storage."""

    def __init__(self, key: str, reason: str) -> None:
        where = f" {key}" if key else ""
        super().__init__(f"invalid manifest{where}: {reason}")
        self.key = key
        self.reason = reason


class FencedError(Tier2Error):
    def __init__(self, segment: str, epoch: int, owner_epoch: int) -> None:
        super().__init__(
            f"manifest of segment {segment!r} is owned by epoch {owner_epoch}; "
            f"epoch {epoch} is fenced out"
        )
        self.segment = segment
        self.epoch = epoch
        self.owner_epoch = owner_epoch


class Tier2UnavailableError(Tier2Error):
    def __init__(self, uri: str, reason: str) -> None:
        super().__init__(f"Tier 2 at {uri} is unavailable: {reason}")
        self.uri = uri
        self.reason = reason


class Tier2IOError(Tier2Error):
    """``errno`` is the OS error number when there was one (ENOSPC: out of space)."""

    def __init__(self, uri: str, key: str, reason: str, errno: int | None = None) -> None:
        super().__init__(f"Tier 2 at {uri} failed on {key or '(root)'}: {reason}")
        self.uri = uri
        self.key = key
        self.reason = reason
        self.errno = errno


class Tier2ClosedError(Tier2Error):
    def __init__(self, uri: str) -> None:
        super().__init__(f"chunk storage {uri} is closed")
        self.uri = uri


class InvalidTier2UriError(Tier2Error):
    def __init__(self, uri: str, reason: str) -> None:
        super().__init__(f"invalid Tier 2 location {uri!r}: {reason}")
        self.uri = uri
        self.reason = reason
