"""What a container knows of its segments: segment and container metadata, attribute updates,
and the in-memory part of each segment's time index.

Owns: :mod:`.container_metadata` (``SegmentMetadata``, ``ContainerMetadata``), :mod:`.attributes`
(the conditional attribute updates), :mod:`.time_index` (append boundaries not yet in Tier 2).
May import: the public surface's vocabulary (``errors``, ``names``) and ``segmentstore.tier2``
(the time index shares its sidecar entries). Everything else in the core builds on this package.
"""
