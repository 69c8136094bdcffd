"""Segment containers: the unit of recovery that ties a Durable Log, metadata, read index and
Storage Writer together.

Owns: the container (:mod:`.container`) and its states (:mod:`.status`), what a commit changes
besides metadata (:mod:`.commit_effects`), the retention enforcer (:mod:`.retention`) and the
segment -> container mapping, bit for bit Pravega's (:mod:`.mapping`).
May import: every other core package, ``segmentstore.tier1``, ``tier2`` and ``cache``. Only the
store (:mod:`segmentstore.store`) and the command line import this package.
"""
