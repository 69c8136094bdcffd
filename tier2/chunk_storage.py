"""The chunk storage contract that every Tier 2 backend honours.

The implementations are chosen by URI in :mod:`segmentstore.tier2.factory`.

A chunk storage is a flat namespace of *objects* named by *keys* under one root (a directory, a
bucket prefix, an HDFS path). Keys are ``/``-separated components of ``A-Z a-z 0-9 . _ -`` that
do not start with ``.`` (names starting with ``.`` are the backends' own temporary and lock
files), at most 1024 characters: :mod:`segmentstore.tier2.layout` makes them. Two kinds of object
live there:

* **Chunks**, written with :meth:`ChunkStorage.create` and, where ``supports_append``,
  :meth:`ChunkStorage.append`, read by range.
* **Small documents** (manifests), replaced whole with :meth:`ChunkStorage.put_if` and read
  whole with :meth:`ChunkStorage.get`. A key is used one way or the other, never both.

The contract:

* **Blocking.** Every method blocks on I/O: the core calls them from worker threads, never from
  the event loop. Every method may be called from several threads at once.
* **Durability.** ``create``, ``append``, ``put_if`` and ``delete`` return only once their effect
  survives a crash of this process and of the machine (fsync; a completed PUT; a closed HDFS
  file). What another process wrote and did not see through may be visible without being
  durable: :meth:`ChunkStorage.make_durable` before trusting it.
* **Atomicity.** ``create`` and ``put_if`` are all or nothing: a reader sees the whole new object
  or the previous state, never a part. ``append`` checks the offset before it writes anything,
  but a crash or a failure in the middle of it may leave the object longer by a prefix of the
  parts (the file backend truncates back when it can): after a failed or unacknowledged append,
  call :meth:`ChunkStorage.size` before trying again.
* **Conditional writes.** ``put_if`` replaces an object only if its version is still the one the
  caller read (``None``: only if there is no object), atomically with respect to every other
  ``put_if`` and ``delete`` of that key. A version token is opaque; it identifies the object's
  content (a content hash, an S3 ETag), so writing the very same bytes again yields the same
  token: manifests avoid that by bumping their own version on every save.
* **Errors.** A missing object is ``ChunkNotFoundError``; an unreachable backend
  (refused connections, timeouts, 5xx) is ``Tier2UnavailableError``, which callers retry with
  backoff; other backend failures ``Tier2IOError``; everything is a ``Tier2Error`` with the
  backend's exception as ``__cause__``. An invalid key or a negative offset or length is a
  ``ValueError`` (a bug in the caller).
"""

from __future__ import annotations

import hashlib
import re
from abc import ABC, abstractmethod
from collections.abc import Sequence

Buffer = bytes | bytearray | memoryview
# Keys with their stamps (ChunkStorage.list_stamped).
StampedKeys = list[tuple[str, str]]

MAX_KEY_CHARS = 1024
_KEY = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,254}(/[A-Za-z0-9_-][A-Za-z0-9._-]{0,254})*")


def check_key(key: str) -> str:
    """``key`` if it is a valid key (module docstring), else ``ValueError``."""
    if len(key) > MAX_KEY_CHARS or not _KEY.fullmatch(key):
        raise ValueError(f"invalid Tier 2 key {key!r}")
    return key


def check_range(offset: int, length: int) -> None:
    if offset < 0 or length < 0:
        raise ValueError(f"offset ({offset}) and length ({length}) must not be negative")


def content_version(data: Buffer) -> str:
    """The version token of backends that derive it from the content (file, HDFS)."""
    return hashlib.sha256(data).hexdigest()[:32]


class ChunkStorage(ABC):
    """One Tier 2 location: objects under keys (module docstring for the contract)."""

    uri: str
    """The location, normalised and without credentials: ``file:///abs``, ``s3://b/p``, ..."""

    supports_append: bool
    """Whether :meth:`append` works. When False every chunk is written whole by ``create``."""

    concurrent_writes: int = 32
    """How many calls at once pay off. An object store answers each call after a network
    round trip, so many calls under way hide it; a local disk is bound by its syncs, which
    more calls at once only queue (and the Tier 1 log's syncs queue behind them)."""

    @abstractmethod
    def create(self, key: str, parts: Sequence[Buffer]) -> None:
        """Store a new object made of ``parts`` (concatenated; may be none) under ``key``.

        Durable and whole when it returns. ``ChunkExistsError`` if an object is already there.
        """

    @abstractmethod
    def append(self, key: str, offset: int, parts: Sequence[Buffer]) -> None:
        """Add ``parts`` at the end of the object, which must be ``offset`` bytes long.

        Only where ``supports_append`` (else ``Tier2IOError``). ``BadChunkOffsetError``,
        writing nothing, if the object's size is not ``offset``; ``ChunkNotFoundError`` if there
        is no object. Durable when it returns; see the module docstring for failures midway.
        """

    @abstractmethod
    def read(self, key: str, offset: int, length: int) -> bytes:
        """Exactly the bytes ``[offset, offset + length)`` of the object.

        ``ChunkRangeError`` if the object is shorter, ``ChunkNotFoundError`` if it is missing.
        """

    @abstractmethod
    def size(self, key: str) -> int:
        """The object's length in bytes; ``ChunkNotFoundError`` if it is missing."""

    @abstractmethod
    def exists(self, key: str) -> bool:
        """Whether an object is stored under ``key``."""

    @abstractmethod
    def delete(self, key: str) -> None:
        """Remove the object, durably. Idempotent: a missing object is not an error."""

    @abstractmethod
    def list(
        self, prefix: str, start_after: str | None = None, limit: int | None = None
    ) -> list[str]:
        """The keys that start with ``prefix`` (a string prefix, not a directory), sorted by
        code point: every one, or only those after ``start_after``, and at most ``limit``.

        The work is in proportion to the keys listed (and, on a file system, the directories
        on the way to them), not to all keys stored. A listing is not a snapshot: readers of
        segment data trust manifests, never listings.
        """

    def list_stamped(self, prefix: str) -> StampedKeys:
        """:meth:`list` with a *stamp* for each key: a string that changes whenever the object
        is replaced (an ETag, or a file's inode and modification time), so that a reader who
        lists again reads only what changed. An empty stamp says nothing: read the object.
        Backends that can stamp keys without reading each object do."""
        return [(key, "") for key in self.list(prefix)]

    @abstractmethod
    def get(self, key: str) -> tuple[bytes, str] | None:
        """The whole object and its version token, or None if there is none."""

    @abstractmethod
    def put_if(self, key: str, data: bytes, expected_version: str | None) -> str:
        """Replace the object with ``data`` if its version is ``expected_version``.

        ``None`` means "only if there is no object". Atomic and durable; returns the new
        version token. ``ManifestConflictError`` (nothing written) if the object's version is
        another one, or the object is missing when a version was expected.
        """

    @abstractmethod
    def make_durable(self, key: str) -> None:
        """Make the object under ``key``, as :meth:`get` and :meth:`read` see it now, survive
        a crash of the machine. Needed before trusting what another process wrote: one that
        crashed before its write returned leaves an object others see but that a power loss
        may still take back (a file renamed into place whose directory was not yet synced).
        Nothing to do where what is seen is durable (a completed PUT, a closed HDFS file); a
        missing object is not an error."""

    @abstractmethod
    def close(self) -> None:
        """Release the backend's clients. Idempotent; other calls then raise Tier2ClosedError."""
