"""Cluster mode: nodes that share one JetStream Tier 1 and one Tier 2 and split the containers.

Owns: the balanced assignment of containers to live nodes (:mod:`.assignment`), the service
that keeps this node's leases and takes, hands over and gives up containers
(:mod:`.membership`), which routing asks who owns what.
May import: the store, the containers package and ``segmentstore.tier1`` (the lease store).
The HTTP layer and the command line import this package; the store never does.
"""
