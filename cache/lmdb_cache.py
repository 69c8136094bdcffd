"""``LmdbCache``: the cache contract over an LMDB environment in a scratch directory.

One LMDB record per block: the key is the entry's address and the block's index in the entry
(``>QI``, big-endian, so an entry's blocks are adjacent and in order), the value the block's
bytes; an entry's last block holds only the bytes written so far and is rewritten longer by
appends. Entry lengths are kept in a dict (entries are bounded by blocks); an empty entry has
no record but is charged its one block like every entry. The environment is volatile: no
sync, no meta sync, no lock file, a writable memory map; every operation is one write or read
transaction. ``lmdb.Error`` is translated to ``CacheError`` here and nowhere else.
"""

from __future__ import annotations

import os
import shutil
import struct
import tempfile

import lmdb

from segmentstore.cache.cache import DEFAULT_BLOCK_BYTES, Buffer, Cache, CacheStats
from segmentstore.cache.errors import (
    CacheClosedError,
    CacheEntryNotFoundError,
    CacheError,
    CacheFullError,
    CacheRangeError,
)

_KEY = struct.Struct(">QI")
# A full 4 KiB value does not fit in a 4 KiB page with its header, so LMDB puts it on two
# overflow pages: the map needs about twice the payload, plus B-tree pages and free-list slack.
# It is only address space (the file is sparse) until pages are written.
_MAP_FACTOR = 4
_MAP_SLACK_BYTES = 64 * 1024 * 1024


class LmdbCache(Cache):
    """Blocks as LMDB records under ``path`` (a new temporary directory when None).

    ``path`` belongs to the cache: whatever an earlier run left there is discarded on open,
    and a temporary directory is removed on :meth:`close`.

    :meth:`view` cannot lend LMDB's memory: a value's memory is valid only inside its
    transaction, and without a lock file a later write may reuse its pages at once. It returns
    one view of a private copy instead, made like :meth:`read` makes its result.

    Raises ``CacheFullError`` also, changing nothing, if the LMDB map itself runs out (free
    pages too fragmented for a block); sized at ``4 * max_bytes`` this has not been seen.
    """

    def __init__(
        self,
        max_bytes: int,
        block_bytes: int = DEFAULT_BLOCK_BYTES,
        path: str | os.PathLike[str] | None = None,
    ) -> None:
        if max_bytes < block_bytes or block_bytes <= 0:
            raise ValueError(f"max_bytes ({max_bytes}) must hold a block of {block_bytes}")
        self._max_bytes = max_bytes
        self._block_bytes = block_bytes
        self._max_blocks = max_bytes // block_bytes
        self._scratch = path is None
        self._path = tempfile.mkdtemp(prefix="lmdb-cache-") if path is None else os.fspath(path)
        try:
            os.makedirs(self._path, exist_ok=True)
            self._env = lmdb.open(
                self._path,
                map_size=_MAP_FACTOR * max_bytes + _MAP_SLACK_BYTES,
                writemap=True,
                sync=False,
                metasync=False,
                lock=False,
                readahead=False,
                meminit=False,
                max_dbs=0,
            )
            with self._env.begin(write=True) as txn:
                txn.drop(self._env.open_db(txn=txn), delete=False)
        except (OSError, lmdb.Error) as e:
            self._remove_scratch()
            raise CacheError(f"cannot open an LMDB cache in {self._path}: {e}") from e
        self._lengths: dict[int, int] = {}
        self._used_blocks = 0
        self._next_address = 1
        self._stored_bytes = 0
        self._hits = 0
        self._misses = 0
        self._evictions = 0
        self._closed = False

    @property
    def block_bytes(self) -> int:
        return self._block_bytes

    @property
    def max_bytes(self) -> int:
        return self._max_bytes

    @property
    def path(self) -> str:
        return self._path

    def insert(self, data: Buffer) -> int:
        source = memoryview(data).cast("B")
        size = len(source)
        block_bytes = self._block_bytes
        blocks = (size + block_bytes - 1) // block_bytes or 1
        self._reserve(blocks)
        address = self._next_address
        pack = _KEY.pack
        try:
            with self._env.begin(write=True) as txn:
                # The newest address sorts after every key: MDB_APPEND skips the searches.
                for index in range((size + block_bytes - 1) // block_bytes):
                    begin = index * block_bytes
                    txn.put(pack(address, index), source[begin : begin + block_bytes], append=True)
        except lmdb.MapFullError as e:
            raise self._full(blocks) from e
        except lmdb.Error as e:
            raise CacheError(f"lmdb insert failed: {e}") from e
        self._next_address = address + 1
        self._lengths[address] = size
        self._used_blocks += blocks
        self._stored_bytes += size
        return address

    def append(self, address: int, data: Buffer) -> int:
        length = self._length(address)
        source = memoryview(data).cast("B")
        size = len(source)
        if size == 0:
            return length
        block_bytes = self._block_bytes
        blocks = (length + block_bytes - 1) // block_bytes or 1
        blocks_after = (length + size + block_bytes - 1) // block_bytes
        self._reserve(blocks_after - blocks)
        pack = _KEY.pack
        try:
            with self._env.begin(write=True) as txn:
                position = 0
                index, tail = divmod(length, block_bytes)
                if tail:  # fill the last block first
                    key = pack(address, index)
                    position = min(block_bytes - tail, size)
                    txn.put(key, txn.get(key, b"") + source[:position])
                    index += 1
                while position < size:
                    txn.put(pack(address, index), source[position : position + block_bytes])
                    position += block_bytes
                    index += 1
        except lmdb.MapFullError as e:
            raise self._full(blocks_after - blocks) from e
        except lmdb.Error as e:
            raise CacheError(f"lmdb append failed: {e}") from e
        self._lengths[address] = length + size
        self._used_blocks += blocks_after - blocks
        self._stored_bytes += size
        return length + size

    def read(self, address: int, offset: int, length: int) -> bytes:
        self._hit(address, offset, length)
        if length == 0:
            return b""
        block_bytes = self._block_bytes
        first, skip = divmod(offset, block_bytes)
        last = (offset + length - 1) // block_bytes
        pack = _KEY.pack
        try:
            with self._env.begin(buffers=True) as txn:
                get = txn.get
                if first == last:
                    value = get(pack(address, first))
                    assert value is not None
                    return bytes(value[skip : skip + length])
                parts: list[memoryview] = []
                for index in range(first, last + 1):
                    value = get(pack(address, index))
                    assert value is not None
                    parts.append(value)
                parts[0] = parts[0][skip:]
                parts[-1] = parts[-1][: (offset + length) - last * block_bytes]
                # The views are valid inside the transaction: join copies each once.
                return b"".join(parts)
        except lmdb.Error as e:
            raise CacheError(f"lmdb read failed: {e}") from e

    def view(self, address: int, offset: int, length: int) -> list[memoryview]:
        if length == 0:
            self._hit(address, offset, length)
            return []
        return [memoryview(self.read(address, offset, length))]

    def length(self, address: int) -> int:
        return self._length(address)

    def delete(self, address: int) -> None:
        length = self._length(address)
        pack = _KEY.pack
        try:
            with self._env.begin(write=True) as txn:
                for index in range((length + self._block_bytes - 1) // self._block_bytes):
                    txn.delete(pack(address, index))
        except lmdb.Error as e:
            raise CacheError(f"lmdb delete failed: {e}") from e
        del self._lengths[address]
        self._used_blocks -= (length + self._block_bytes - 1) // self._block_bytes or 1
        self._stored_bytes -= length

    def evict(self, address: int) -> None:
        self.delete(address)
        self._evictions += 1

    @property
    def used_bytes(self) -> int:
        return self._used_blocks * self._block_bytes

    @property
    def stats(self) -> CacheStats:
        return CacheStats(
            used_bytes=self._used_blocks * self._block_bytes,
            stored_bytes=self._stored_bytes,
            max_bytes=self._max_bytes,
            entries=len(self._lengths),
            hits=self._hits,
            misses=self._misses,
            evictions=self._evictions,
        )

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._lengths.clear()
            try:
                self._env.close()
            finally:
                self._remove_scratch()

    def _length(self, address: int) -> int:
        length = self._lengths.get(address)
        if length is None:
            raise CacheClosedError() if self._closed else CacheEntryNotFoundError(address)
        return length

    def _hit(self, address: int, offset: int, length: int) -> None:
        entry_length = self._lengths.get(address)
        if entry_length is None:
            if self._closed:
                raise CacheClosedError()
            self._misses += 1
            raise CacheEntryNotFoundError(address)
        if offset < 0 or length < 0 or offset + length > entry_length:
            raise CacheRangeError(address, offset, length, entry_length)
        self._hits += 1

    def _reserve(self, blocks: int) -> None:
        if self._closed:
            raise CacheClosedError()
        if self._used_blocks + blocks > self._max_blocks:
            raise self._full(blocks)

    def _full(self, blocks: int) -> CacheFullError:
        return CacheFullError(
            blocks * self._block_bytes, self._used_blocks * self._block_bytes, self._max_bytes
        )

    def _remove_scratch(self) -> None:
        if self._scratch:
            shutil.rmtree(self._path, ignore_errors=True)
