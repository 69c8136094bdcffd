"""A node on every core: ``segmentstore serve --workers N`` as N worker processes under a small
supervisor, each owning a fixed share of the node's containers outright.

Owns: which worker owns which container (:mod:`.share`; the workers' names are the
contract's, :mod:`segmentstore.contracts.members`); a worker's
place in its node, handed to it by the supervisor (:mod:`.place`); the board in shared memory
where each worker says whether it serves and how its containers stand (:mod:`.board`); the
supervisor that starts the workers, restarts one that dies and takes them all with it
(:mod:`.supervisor`, with what a worker does first in :mod:`.child`); and the ownership of a
single node's containers by its workers, which routing asks as it asks a cluster's
membership (:mod:`.ownership`).
May import: ``store``, ``containers``, ``cluster``, ``contracts`` and ``vocabulary``. The HTTP
layer and the command line import this package; the store never does.
"""
