"""What the file backend does beyond the contract: its files on disk, rollback of a failed
append, cleanup of empty directories, and many threads working in one directory."""

from __future__ import annotations

import errno
import resource
import signal
import threading
from pathlib import Path

import pytest

from segmentstore.tier2 import FileChunkStorage, Tier2IOError, open_chunk_storage


def files_under(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_uris_and_bare_paths_name_the_same_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for uri in (str(tmp_path / "t2"), f"file://{tmp_path}/t2", "t2", "file://./t2", "./t2/"):
        storage = open_chunk_storage(uri)
        assert storage.uri == f"file://{tmp_path}/t2"
        assert storage.supports_append
        storage.close()
    assert (tmp_path / "t2").is_dir()


def test_only_objects_remain_on_disk(tmp_path: Path) -> None:
    storage = FileChunkStorage(tmp_path)
    storage.create("segments/h/chunk-0", [b"abc"])
    storage.append("segments/h/chunk-0", 3, [b"def"])
    version = storage.put_if("segments/h/manifest.json", b"{}", None)
    storage.put_if("segments/h/manifest.json", b"{ }", version)
    # The objects, and one shared lock file (no lock file per object, no temporary file).
    (lock,) = (tmp_path / ".locks").iterdir()
    assert files_under(tmp_path) == [
        ".locks",
        f".locks/{lock.name}",
        "segments",
        "segments/h",
        "segments/h/chunk-0",
        "segments/h/manifest.json",
    ]
    assert (tmp_path / "segments/h/chunk-0").read_bytes() == b"abcdef"


def test_leftovers_of_a_crash_are_never_listed(tmp_path: Path) -> None:
    storage = FileChunkStorage(tmp_path)
    storage.create("d/chunk", [b"x"])
    (tmp_path / "d/.chunk-2.0123456789abcdef.tmp").write_bytes(b"half a chunk")
    (tmp_path / "d/.hidden-dir").mkdir()
    (tmp_path / "d/.hidden-dir/x").write_bytes(b"")
    assert storage.list("") == ["d/chunk"]


def test_delete_removes_the_directories_it_empties(tmp_path: Path) -> None:
    storage = FileChunkStorage(tmp_path / "root")
    storage.create("segments/h1/chunk-0", [b"x"])
    storage.put_if("segments/h1/manifest.json", b"{}", None)
    storage.create("segments/h2/chunk-0", [b"y"])
    storage.delete("segments/h1/chunk-0")
    storage.delete("segments/h1/manifest.json")
    objects = [f for f in files_under(tmp_path / "root") if not f.startswith(".locks")]
    assert objects == ["segments", "segments/h2", "segments/h2/chunk-0"]
    storage.delete("segments/h2/chunk-0")
    assert [f for f in files_under(tmp_path / "root") if not f.startswith(".locks")] == []
    assert (tmp_path / "root").is_dir()


def test_a_failed_append_is_rolled_back(tmp_path: Path) -> None:
    """A real write error, EFBIG, from RLIMIT_FSIZE just above the chunk's current size (as in
    the Tier 1 tests: a full disk is not available here). SIGXFSZ is ignored so that the kernel
    returns the error instead of killing the process."""
    storage = FileChunkStorage(tmp_path)
    storage.create("chunk", [b"a" * 4096])
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096 + 100, hard))
    try:
        with pytest.raises(Tier2IOError) as caught:
            storage.append("chunk", 4096, [b"b" * 1000])
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)
    assert caught.value.errno == errno.EFBIG
    assert isinstance(caught.value.__cause__, OSError)
    assert storage.size("chunk") == 4096  # not 4196: the partial write was truncated away
    storage.append("chunk", 4096, [b"b" * 1000])
    assert storage.read("chunk", 4090, 10) == b"aaaaaabbbb"


def test_threads_creating_and_deleting_in_one_directory(tmp_path: Path) -> None:
    """Deletes remove emptied directories while other threads create files in them: the writers
    must recreate the directory rather than fail."""
    storage = FileChunkStorage(tmp_path)
    errors: list[BaseException] = []

    def churn(worker: int) -> None:
        try:
            for i in range(150):
                key = f"segments/shared/w{worker}-{i}"
                if worker % 2:
                    storage.create(key, [b"x"])
                else:
                    storage.put_if(key, b"x", None)
                storage.delete(key)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=churn, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert storage.list("") == []


def test_a_root_that_cannot_be_made_is_an_io_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(Tier2IOError) as caught:
        FileChunkStorage(tmp_path / "file" / "root")
    assert caught.value.errno == errno.ENOTDIR


def test_objects_are_plain_files_that_anything_can_read(tmp_path: Path) -> None:
    storage = FileChunkStorage(tmp_path)
    storage.create("segments/h/chunk-00000000000000000000-e0000000001", [b"raw ", b"bytes"])
    path = tmp_path / "segments/h/chunk-00000000000000000000-e0000000001"
    assert path.read_bytes() == b"raw bytes"
