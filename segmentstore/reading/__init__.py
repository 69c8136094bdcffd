"""Reads: where each segment's readable bytes are, and who waits at its tail.

Owns: the per-segment read index (:mod:`.read_index`) over an AVL tree (:mod:`.avl_tree`,
:mod:`.avl_nodes`), the cache manager that shares one bounded cache between containers
(:mod:`.cache_manager`), reads that miss the cache and go to Tier 2 (:mod:`.tier2_reads`),
and questions about append times (:mod:`.time_lookup`, for ``:offsetAt`` and retention).
May import: ``metadata``, ``logs`` (the operations it indexes), ``contracts``, ``vocabulary``,
``cache`` and ``tier2``; never ``writer`` or ``containers``.
"""
