"""What the store reports as it works, for whoever watches it (the HTTP service's metrics).

The core knows nothing of any metrics library: it calls an :class:`Observations` hub, which
passes each figure to every :class:`StoreObserver` added to it. With no observer, a report
costs one attribute look-up and an empty loop. Observers are called on the event loop, except
Tier 2 writes, which are reported from the thread that made them.
"""

from __future__ import annotations


class StoreObserver:
    """Receives the store's figures; every method does nothing unless overridden."""

    def tier1_written(self, seconds: float) -> None:
        """A Tier 1 record is durable ``seconds`` after it was handed to Tier 1."""

    def tier2_written(self, seconds: float, size: int) -> None:
        """A chunk write of ``size`` bytes to Tier 2 took ``seconds``."""

    def recovered(self, container: int, seconds: float) -> None:
        """Container ``container`` recovered (replay, reconcile, checkpoint) in ``seconds``."""


class Observations:
    """The hub the store's parts report to; observers may come and go at any time."""

    def __init__(self) -> None:
        self.observers: tuple[StoreObserver, ...] = ()

    def add(self, observer: StoreObserver) -> None:
        self.observers = (*self.observers, observer)

    def remove(self, observer: StoreObserver) -> None:
        self.observers = tuple(o for o in self.observers if o is not observer)

    def tier1_written(self, seconds: float) -> None:
        for observer in self.observers:
            observer.tier1_written(seconds)

    def tier2_written(self, seconds: float, size: int) -> None:
        for observer in self.observers:
            observer.tier2_written(seconds, size)

    def recovered(self, container: int, seconds: float) -> None:
        for observer in self.observers:
            observer.recovered(container, seconds)
