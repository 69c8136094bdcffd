"""The partition faults of a spawned cluster: each a plan of which links of the drill's
switchboard fail and how (:class:`segmentstore.drill.partitions.Partitions`), held past the
lease and healed, the cluster watched meanwhile."""

from __future__ import annotations

import random
from abc import abstractmethod

from segmentstore.drill.faults.context import Outcome
from segmentstore.drill.faults.fault import Fault
from segmentstore.drill.partitions import Partitions, Plan


class Partition(Fault):
    shapes = frozenset({"cluster"})

    @abstractmethod
    def plan(self, partitions: Partitions, rng: random.Random) -> Plan:
        """Which links fail, and how."""

    async def run(self) -> Outcome:
        context = self.context
        partitions = self.cluster.partitions
        assert partitions is not None, "the cluster has started"
        held = await partitions.hold(
            self.kind,
            self.plan(partitions, context.rng),
            context.rng,
            context.hold_s,
            context.limit_s,
            context.probes,
            context.recovered,
        )
        return Outcome(held.recovery_s, held.note, held.measures, held.problems)


class JetStreamPartition(Partition):
    kind = "jetstream_partition"
    description = (
        "a node loses every JetStream server: within its lease it must stop serving, and the"
        " others take its containers over"
    )

    def plan(self, partitions: Partitions, rng: random.Random) -> Plan:
        return partitions.cut_from_jetstream(rng)


class NodePartition(Partition):
    kind = "node_partition"
    description = "a node loses every other node, but not JetStream: it keeps its containers"

    def plan(self, partitions: Partitions, rng: random.Random) -> Plan:
        return partitions.cut_from_nodes(rng)


class JetStreamIsolation(Partition):
    kind = "jetstream_isolation"
    description = "one JetStream server loses the other two"

    def plan(self, partitions: Partitions, rng: random.Random) -> Plan:
        return partitions.isolate_jetstream_server(rng)


class OneWay(Partition):
    kind = "one_way"
    description = "one direction of some links is held while the other passes"

    def plan(self, partitions: Partitions, rng: random.Random) -> Plan:
        return partitions.one_way(rng)


class Delay(Partition):
    kind = "delay"
    description = "every byte on some links arrives later (20 ms to half a lease)"

    def plan(self, partitions: Partitions, rng: random.Random) -> Plan:
        return partitions.delay(rng)
