"""Cluster mode: nodes that share one JetStream Tier 1 and one Tier 2 and split the containers.

Owns: the balanced assignment of containers to live nodes (:mod:`.assignment`), the service
that keeps this node's leases and takes, hands over and gives up containers
(:mod:`.membership`), which routing asks who owns what; the leases themselves, behind an
interface that imports no implementation (:mod:`.leases`), kept in a JetStream key-value
bucket (:mod:`.jetstream_leases`, fed by :mod:`.lease_watch`); and the cluster's secret
(:mod:`.secret`).
May import: ``store``, ``containers``, ``contracts``, ``vocabulary`` and ``tier1`` (its
JetStream connection and signed entries, under the leases). The HTTP layer and the command
line import this package; the store never does.
"""
