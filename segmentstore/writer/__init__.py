"""The Storage Writer of a container: committed appends aggregated into Tier 2 chunks.

Owns: the interface a container holds it by (:mod:`.writer`), the writer's loop and what it
tells the container (:mod:`.storage_writer`) and the steps
that bring one segment's Tier 2 copy up to date (:mod:`.segment_flusher`).
May import: ``metadata``, ``logs`` (the operations it flushes), ``contracts``, ``vocabulary``
and ``tier2``; never ``reading`` or ``containers``.
"""
