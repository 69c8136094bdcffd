"""The FUSE kernel protocol, as much of it as a pass-through file system needs: the opcodes,
the fixed-size structures (``include/uapi/linux/fuse.h``, protocol 7.31, which every kernel
since 5.4 speaks) and the flag bits.

Every request read from ``/dev/fuse`` starts with :data:`IN_HEADER`; every reply written to it
starts with :data:`OUT_HEADER` and is written whole, in one ``write``.
"""

from __future__ import annotations

import struct

KERNEL_MAJOR = 7
KERNEL_MINOR = 31  # the version this server speaks; the kernel adapts to it
ROOT_ID = 1

# Requests.
LOOKUP = 1
FORGET = 2  # no reply
GETATTR = 3
SETATTR = 4
READLINK = 5
SYMLINK = 6
MKNOD = 8
MKDIR = 9
UNLINK = 10
RMDIR = 11
RENAME = 12
LINK = 13
OPEN = 14
READ = 15
WRITE = 16
STATFS = 17
RELEASE = 18
FSYNC = 20
FLUSH = 25
INIT = 26
OPENDIR = 27
READDIR = 28
RELEASEDIR = 29
FSYNCDIR = 30
CREATE = 35
INTERRUPT = 36  # no reply
DESTROY = 38
BATCH_FORGET = 42  # no reply
RENAME2 = 45
NO_REPLY = frozenset({FORGET, INTERRUPT, BATCH_FORGET})

# fuse_init_out.flags the server asks for (only those the kernel offers are kept).
ASYNC_READ = 1 << 0
BIG_WRITES = 1 << 5
MAX_PAGES = 1 << 22
# Deliberately not asked for: POSIX_LOCKS and FLOCK_LOCKS (the kernel then keeps locks itself,
# which is right for one mount), ATOMIC_O_TRUNC (O_TRUNC then arrives as a SETATTR of the
# size, a truncation the model sees), WRITEBACK_CACHE (every write reaches the server before
# write(2) returns, so the server knows every byte a process wrote).

FSYNC_FDATASYNC = 1 << 0
GETATTR_FH = 1 << 0

# fuse_setattr_in.valid
FATTR_MODE = 1 << 0
FATTR_UID = 1 << 1
FATTR_GID = 1 << 2
FATTR_SIZE = 1 << 3
FATTR_ATIME = 1 << 4
FATTR_MTIME = 1 << 5
FATTR_FH = 1 << 6
FATTR_ATIME_NOW = 1 << 7
FATTR_MTIME_NOW = 1 << 8

RENAME_NOREPLACE = 1 << 0

IN_HEADER = struct.Struct("=IIQQIIIHH")  # len opcode unique nodeid uid gid pid extlen pad
OUT_HEADER = struct.Struct("=IiQ")  # len error unique
ATTR = struct.Struct("=QQQQQQIIIIIIIIII")
ENTRY_OUT = struct.Struct("=QQQQII")  # + ATTR: nodeid generation entry/attr valid (s, ns)
ATTR_OUT = struct.Struct("=QII")  # + ATTR: attr_valid, attr_valid_nsec, dummy
INIT_IN = struct.Struct("=IIII")  # major minor max_readahead flags
INIT_OUT = struct.Struct("=IIIIHHIIHHI28x")
GETATTR_IN = struct.Struct("=IIQ")  # getattr_flags dummy fh
SETATTR_IN = struct.Struct("=IIQQQQQQIIIIIIII")
MKNOD_IN = struct.Struct("=IIII")  # mode rdev umask padding
MKDIR_IN = struct.Struct("=II")  # mode umask
RENAME_IN = struct.Struct("=Q")  # newdir
RENAME2_IN = struct.Struct("=QII")  # newdir flags padding
LINK_IN = struct.Struct("=Q")  # oldnodeid
OPEN_IN = struct.Struct("=II")  # flags open_flags
CREATE_IN = struct.Struct("=IIII")  # flags mode umask open_flags
OPEN_OUT = struct.Struct("=QII")  # fh open_flags padding
READ_IN = struct.Struct("=QQIIQII")  # fh offset size read_flags lock_owner flags padding
WRITE_IN = struct.Struct("=QQIIQII")  # fh offset size write_flags lock_owner flags padding
WRITE_OUT = struct.Struct("=II")
RELEASE_IN = struct.Struct("=QIIQ")  # fh flags release_flags lock_owner
FSYNC_IN = struct.Struct("=QII")  # fh fsync_flags padding
KSTATFS = struct.Struct("=QQQQQIIII24x")
DIRENT = struct.Struct("=QQII")  # ino off namelen type, then the name, padded to 8 bytes

assert IN_HEADER.size == 40 and OUT_HEADER.size == 16 and ATTR.size == 88
assert ENTRY_OUT.size + ATTR.size == 128 and ATTR_OUT.size + ATTR.size == 104
assert INIT_OUT.size == 64 and SETATTR_IN.size == 88 and KSTATFS.size == 80


def dirent(ino: int, next_offset: int, name: bytes, kind: int) -> bytes:
    entry = DIRENT.pack(ino, next_offset, len(name), kind) + name
    return entry + b"\0" * (-len(entry) % 8)
