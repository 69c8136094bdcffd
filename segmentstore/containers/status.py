"""The states of a segment container, as ``/v1/containers`` and the metrics report them."""

from __future__ import annotations

from enum import StrEnum


class ContainerStatus(StrEnum):
    STOPPED = "stopped"
    RECOVERING = "recovering"  # replaying Tier 1; not serving yet
    RUNNING = "running"
    OFFLINE = "offline"  # failed (Tier 1, Tier 2 or a corrupt log): restart it to recover
