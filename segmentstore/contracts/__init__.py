"""What the client and the server both speak: the contract, with no code of either side.

Owns: the one exception tree (:mod:`.errors`), segment and attribute name rules
(:mod:`.names`), the attribute update types and what each means (:mod:`.attributes`), the
event framing (:mod:`.events`), the segment -> container mapping, bit for bit Pravega's
(:mod:`.mapping`), the results a call answers (:mod:`.segment_info`), and the ids of a
deployment's members, workers included (:mod:`.members`).
May import: nothing of the project. The client (:mod:`segmentstore.client`) imports this
package and nothing else of the server; the server's layers all build on it.
"""
