"""Segment containers: the unit of recovery that ties a Durable Log, metadata, read index and
Storage Writer together.

Owns: the container (:mod:`.container`), the factories of its parts (:mod:`.parts`: the
Durable Log, read indexes and Storage Writer it is built from) and its states
(:mod:`.status`), what a commit changes
besides metadata (:mod:`.commit_effects`), and the retention enforcer (:mod:`.retention`); the
segment -> container mapping is :mod:`segmentstore.contracts.mapping`.
May import: every other core package, ``segmentstore.tier1``, ``tier2`` and ``cache``. Only the
store (:mod:`segmentstore.store`) and the command line import this package.
"""
