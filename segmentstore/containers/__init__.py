"""Segment containers: the unit of recovery that ties a Durable Log, metadata, read index and
Storage Writer together.

Owns: the container (:mod:`.container`: its lifecycle and changes; its reads, :mod:`.reads`;
what its Storage Writer and active segments call back into, :mod:`.host_side`), the factories
of its parts (:mod:`.parts`: the Durable Log, read indexes and Storage Writer it is built from)
and its states (:mod:`.status`), what a commit changes besides metadata
(:mod:`.commit_effects`), and the retention enforcer (:mod:`.retention`); and a store's
containers together (:mod:`.registry`: built over their shared parts, recovered, supervised,
restarted, taken and released) and the names they hold, listed by prefix (:mod:`.listing`);
the segment -> container mapping is :mod:`segmentstore.contracts.mapping`.
May import: the other core packages (``metadata``, ``logs``, ``reading``, ``writer``), the
storage leaves (``tier1``, ``tier2``, ``cache``), ``contracts`` and ``vocabulary``. The store
(:mod:`segmentstore.store`) opens the registry; the cluster's membership, the HTTP API (its
container views) and the command line use the containers through it.
"""
