"""The Durable Log of a container: every change as an operation, framed into Tier 1 records.

Owns: the operations (:mod:`.operations`, :mod:`.metadata_operations`, their wire form in
:mod:`.operation_codec`), data frames (:mod:`.data_frame`), the queue and processor that make
them durable (:mod:`.durable_log`) and the interface a container holds it by
(:mod:`.operation_log`), what Tier 1 must still keep (:mod:`.tier1_retention`), and
the replay that rebuilds metadata from Tier 1 (:mod:`.recovery`).
May import: ``metadata``, ``contracts``, ``vocabulary`` and ``tier1``; never ``reading``,
``writer`` or ``containers``.
"""
