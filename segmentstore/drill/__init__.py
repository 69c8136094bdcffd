"""Recovery drills: put load on a deployment, break it the way production breaks, and prove
that nothing acknowledged was lost and how long recovery took (``segmentstore drill``).

Owns: the load (:mod:`.load`), the faults, one class per kind in a registry (:mod:`.faults`),
the deployments it drills (:mod:`.deployment`, :mod:`.cluster_deployment`,
:mod:`.jetstream_power`), verification (:mod:`.verify`) and the report (:mod:`.report`).
May import: ``harness`` (the processes it spawns), ``lazyfs``, ``contracts`` and
``vocabulary``: it knows the store by its HTTP contract only.
"""
