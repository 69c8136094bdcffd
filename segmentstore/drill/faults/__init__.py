"""The faults a drill injects: one class per kind, each registered here, once.

A kind is found only here (:func:`fault_class`): one that is not registered is refused,
never taken for another. Adding a fault is its class (in the module of its family: processes,
storage, a cluster's nodes, partitions), its line in :data:`FAULTS`, and docs/operations.md.
"""

from __future__ import annotations

from segmentstore.drill.faults.cluster_nodes import JetStreamKill, NodeLeave, NodePause
from segmentstore.drill.faults.context import FaultContext, Outcome, find_probes
from segmentstore.drill.faults.fault import SHAPES, Fault
from segmentstore.drill.faults.partitions import (
    Delay,
    JetStreamIsolation,
    JetStreamPartition,
    NodePartition,
    OneWay,
    Partition,
)
from segmentstore.drill.faults.processes import (
    ContainerRestart,
    JetStreamPowerLoss,
    Kill,
    PowerLoss,
    TornTail,
)
from segmentstore.drill.faults.storage import Tier1Full, Tier2Full, Tier2Outage

FAULTS: dict[str, type[Fault]] = {
    cls.kind: cls
    for cls in (
        Kill,
        ContainerRestart,
        Tier2Outage,
        Tier2Full,
        Tier1Full,
        TornTail,
        PowerLoss,
        NodePause,
        NodeLeave,
        JetStreamKill,
        JetStreamPowerLoss,
        JetStreamPartition,
        NodePartition,
        JetStreamIsolation,
        OneWay,
        Delay,
    )
}
KINDS = tuple(FAULTS)
PARTITION_KINDS = tuple(k for k, cls in FAULTS.items() if issubclass(cls, Partition))


class UnknownFaultError(ValueError):
    pass


def fault_class(kind: str) -> type[Fault]:
    """The fault of ``kind``; :class:`UnknownFaultError` for one that is not registered."""
    try:
        return FAULTS[kind]
    except KeyError:
        raise UnknownFaultError(f"unknown fault kind {kind!r}; known: {list(KINDS)}") from None


def kinds_for(shape: str) -> tuple[str, ...]:
    """Every kind a deployment of ``shape`` (a key of :data:`SHAPES`) has."""
    if shape not in SHAPES:
        raise ValueError(f"unknown deployment shape {shape!r}")
    return tuple(kind for kind, cls in FAULTS.items() if shape in cls.shapes)


__all__ = [
    "FAULTS",
    "KINDS",
    "PARTITION_KINDS",
    "Fault",
    "FaultContext",
    "Outcome",
    "UnknownFaultError",
    "fault_class",
    "find_probes",
    "kinds_for",
]
