"""A data directory's identity: ``store.json`` fixes its container count for the life of the
data, so that a store opened with another count is refused instead of misplacing segments.

The identity is written only once every container's local Tier 1 directory exists: from then
on, a container directory that is missing was lost, never not yet made.

One process uses a data directory at a time: :func:`lock_data_dir` holds an exclusive lock on
the directory itself for as long as the store is open, and a second process is refused at
once, naming the first. Every refusal here is one sentence that names the cause and the fix.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
from pathlib import Path

from segmentstore.contracts.errors import InvalidArgumentError

IDENTITY_FILE = "store.json"
TIER1_DIR = "tier1"  # the local Tier 1 logs, one directory per container
_FIX = "give --data-dir (store.data_dir) a directory this process can write"


def container_tier1_dir(data_dir: Path, container: int) -> Path:
    """Where container ``container`` keeps its local Tier 1 log."""
    return data_dir / TIER1_DIR / f"container-{container:04d}"


def claim_data_dir(data_dir: Path, containers: int) -> None:
    """Create ``data_dir``, a Tier 1 directory per container and the identity with
    ``containers``, or check the recorded count (``InvalidArgumentError`` if it differs). The
    identity is written durably and whole, after the directories."""
    make_directories(data_dir)
    identity = data_dir / IDENTITY_FILE
    if identity.exists():
        recorded = _recorded_containers(identity)
        if recorded != containers:
            raise InvalidArgumentError(
                f"{data_dir} was created with {recorded} containers, not {containers}:"
                " the container count cannot change"
            )
        return
    for container in range(containers):
        container_tier1_dir(data_dir, container).mkdir(parents=True, exist_ok=True)
    sync_directory(data_dir / TIER1_DIR)
    sync_directory(data_dir)  # the directories are durable before the identity is
    temporary = identity.with_suffix(".tmp")
    with open(temporary, "w") as f:
        json.dump({"format": 1, "containers": containers}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, identity)
    sync_directory(data_dir)


def _recorded_containers(identity: Path) -> int:
    """The container count ``store.json`` records; a refusal if it is not a store's."""
    try:
        document = json.loads(identity.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        raise InvalidArgumentError(
            f"{identity} is damaged (not a JSON document: {error}): restore it from a backup,"
            ' or write {"format": 1, "containers": N} into it with the count this data was'
            " created with"
        ) from error
    except OSError as error:
        raise InvalidArgumentError(f"cannot read {identity}: {error.strerror}: {_FIX}") from error
    recorded = document.get("containers") if isinstance(document, dict) else None
    if not isinstance(recorded, int) or isinstance(recorded, bool) or recorded < 1:
        raise InvalidArgumentError(
            f"{identity} is not a segment store's (it records no container count): the"
            f" directory {identity.parent} belongs to something else; give --data-dir"
            " (store.data_dir) an empty directory or this store's own"
        )
    return recorded


def lock_data_dir(data_dir: Path) -> int:
    """Make ``data_dir`` if need be and lock it for this process; the locked descriptor
    (:func:`unlock_data_dir` gives it back). A refusal naming the cause and the fix if the
    directory cannot be made or written, another process holds it, or its ``store.json`` is
    not a store's."""
    try:
        make_directories(data_dir)
        fd = os.open(data_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as error:
        raise InvalidArgumentError(_unusable(data_dir, error)) from error
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as error:
        holder = _lock_holder(fd)
        os.close(fd)
        if error.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
            raise InvalidArgumentError(_unusable(data_dir, error)) from error
        by = f" (pid {holder})" if holder is not None else ""
        raise InvalidArgumentError(
            f"the data directory {data_dir} is in use by another process{by}: stop it, or give"
            " this one another --data-dir (store.data_dir); two stores must never share one"
        ) from error
    read_only = bool(os.fstatvfs(fd).f_flag & os.ST_RDONLY)
    if read_only or not os.access(data_dir, os.W_OK):
        unlock_data_dir(fd)
        why = "it is on a read-only file system" if read_only else "this user may not write in it"
        raise InvalidArgumentError(f"cannot use the data directory {data_dir}: {why}: {_FIX}")
    identity = data_dir / IDENTITY_FILE
    if identity.exists():
        try:
            _recorded_containers(identity)  # a foreign or damaged one: before Tier 2 is opened
        except InvalidArgumentError:
            unlock_data_dir(fd)
            raise
    return fd


def unlock_data_dir(fd: int | None) -> None:
    if fd is not None:
        os.close(fd)  # closing the descriptor releases its lock


def _unusable(data_dir: Path, error: OSError) -> str:
    if error.errno in (errno.ENOTDIR, errno.EEXIST):
        return f"the data directory {data_dir} is not a directory (a file is in the way): {_FIX}"
    return f"cannot use the data directory {data_dir}: {error.strerror or error}: {_FIX}"


def _lock_holder(fd: int) -> int | None:
    """The process that holds the lock on the directory open as ``fd`` (Linux' /proc/locks),
    or None if that cannot be told."""
    stat = os.fstat(fd)
    wanted = f"{os.major(stat.st_dev):02x}:{os.minor(stat.st_dev):02x}:{stat.st_ino}"
    try:
        with open("/proc/locks") as locks:
            for line in locks:
                fields = line.split()
                if len(fields) > 5 and fields[1] == "FLOCK" and fields[5] == wanted:
                    return int(fields[4])
    except (OSError, ValueError):
        return None
    return None


def make_directories(path: Path) -> None:
    """``mkdir -p`` whose every new directory is durable: its parent is fsynced once it is made
    (a directory's name, like a file's, survives a power loss only once its parent is synced;
    a data directory made and lost so would take everything acknowledged in it along)."""
    if path.is_dir():
        return
    make_directories(path.parent)
    try:
        path.mkdir()
    except FileExistsError:
        return
    sync_directory(path.parent)


def sync_directory(path: Path) -> None:
    """Make the names in directory ``path`` (files created, replaced, removed) durable."""
    directory = os.open(path, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
