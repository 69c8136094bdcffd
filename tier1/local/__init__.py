"""A durable data log in a local directory: group-committed appends to rolled files.

Owns the on-disk format described in the Tier 1 section of ``docs/formats.md``.
"""

from segmentstore.tier1.local.log import LocalDurableDataLog

__all__ = ["LocalDurableDataLog"]
