"""What a container knows of its segments: segment and container metadata, attribute updates,
and the in-memory part of each segment's time index.

Owns: :mod:`.container_metadata` (``SegmentMetadata``, ``ContainerMetadata``) and
:mod:`.time_index` (append boundaries not yet in Tier 2); the attribute updates it applies are
:mod:`segmentstore.contracts.attributes`.
May import: ``contracts``, ``vocabulary`` and ``tier2`` (the time index shares its sidecar
entries). Everything else in the core builds on this package.
"""
