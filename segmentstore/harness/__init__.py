"""The process harness: what the benchmarks, the drill and the tests start on loopback and stop
by PID.

Owns: a JetStream cluster of ``nats-server`` processes (:mod:`.jetstream_cluster`), segment
store nodes on a port chosen once, one (:mod:`.store_node`) or a cluster of them
(:mod:`.store_nodes`), a server on port 0 found by its log line (:mod:`.served_store`: a
store, or a benchmark's baseline), and S3 from moto (:mod:`.moto_s3`, in a process of its own
through :mod:`.moto_process`, or in a thread). Each picks its ports with
:func:`segmentstore.loopback.free_port`, and none reads the environment but the one it is
given.
May import: ``vocabulary``, ``contracts``.
"""
