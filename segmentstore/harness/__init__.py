"""The process harness: what the benchmarks, the drill and the tests start on loopback and stop
by PID.

Owns: a JetStream cluster of ``nats-server`` processes (:mod:`.jetstream_cluster`), segment
store nodes, one (:mod:`.store_node`) or a cluster of them (:mod:`.store_nodes`), and S3 from
moto (:mod:`.moto_s3`, in a process of its own through :mod:`.moto_process`, or in a thread).
Each picks its ports with :func:`segmentstore.loopback.free_port`.
May import: ``vocabulary``, ``contracts``.
"""
