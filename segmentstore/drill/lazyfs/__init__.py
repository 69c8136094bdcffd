"""lazyfs: a file system that forgets what was not synced, to show what a power loss does.

A FUSE pass-through over a backing directory, spoken straight to the kernel through
``/dev/fuse`` (nothing to install or compile), in the spirit of Jepsen's LazyFS. It remembers
which writes, truncations, creations, renames and removals no ``fsync`` has made durable yet,
and on a simulated power loss keeps or drops each of them at random from a seed (so a failure
replays), per file and per operation; the mount then shows only what survived. Which sync
makes a name durable is the model's choice (:mod:`.unsynced_names`): ``strict`` POSIX by
default, where only an ``fsync`` of the directory does.
May import: nothing of the project.
"""

from segmentstore.drill.lazyfs.kernel import FuseUnavailable
from segmentstore.drill.lazyfs.mount import LazyMount

__all__ = ["FuseUnavailable", "LazyMount"]
