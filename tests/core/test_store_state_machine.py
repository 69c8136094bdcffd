"""A Hypothesis state machine: a real ``SegmentStore`` against a model of what API.md promises.

The model is a ``dict[name, bytearray]`` of live segments (their bytes from offset 0, even where
truncated), the set of sealed names, each segment's start offset, attributes and exactly-once
writers. Every rule runs API calls on the store, checks each answer (result or error, with the
error's fields) against the model, and updates the model; after every step the invariants
compare the whole store with the model through the public API. Rules collide on a few names and
on transactions; some submit appends concurrently (sharing batch windows and frames), park a
read at a segment's tail, or close the store while appends are in flight. One rule closes the
store and opens a new one on the same directory, another restarts a single container, so all
the model knows must also survive recovery.

The store runs with tiny Tier 1 files, a checkpoint every few frames and a Storage Writer that
flushes to Tier 2 after a few KiB: within a few steps Tier 1 rolls, checkpoints, is truncated
behind Tier 2, and a reopened container reads from Tier 2 -- the paths recovery depends on.
A failure that depends on the Storage Writer's timing may not replay; Hypothesis then reports
a ``FlakyFailure`` with the error but no minimal example.
"""

from __future__ import annotations

import asyncio
import random
import shutil
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, event, note, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from segmentstore import (
    AppendResult,
    BadAttributeUpdateError,
    BadOffsetError,
    ContainerUnavailableError,
    EndOfSegmentError,
    InvalidArgumentError,
    InvalidNameError,
    OffsetBeyondEndError,
    SegmentExistsError,
    SegmentNotFoundError,
    SegmentSealedError,
    SegmentStore,
    SegmentStoreError,
    SegmentTruncatedError,
)
from segmentstore.container_status import ContainerStatus

# A small alphabet of plain names so that rules collide on the same segments; "/", "~", "." and
# "-" are all legal name characters; two of the names land in each of the two containers.
NAMES = ("a", "scope/s/0", "scope/s/1", "x.y~z-1")
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
ATTRIBUTE_KEYS = ("k1", "k2", "ns:k.3")
UPDATE_TYPES = (
    "replace",
    "replace_if_absent",
    "replace_if_greater",
    "replace_if_equals",
    "accumulate",
)

# No call takes this long unless it hangs (a graceful close included): fail, and shrink.
CALL_TIMEOUT_S = 20
# Long enough that a read still parked at the end means it was never woken.
TAIL_WAIT_MS = 5_000
STORE_OPTIONS: dict[str, Any] = {
    "containers": 2,
    # Small Tier 1 files and frequent checkpoints: rolling, checkpointing and truncating Tier 1
    # happen within a few steps instead of never.
    "tier1": {"segment_bytes": 8192},
    "durable_log": {"checkpoint_every_frames": 3, "max_frame_bytes": 4096},
    # The Storage Writer moves bytes to Tier 2 after a few KiB or a few steps' time, in small
    # chunks, so Tier 1 is truncated behind them and, after a reopen, reads go to Tier 2 in
    # small blocks around what the cache still has in small entries.
    "storage_writer": {
        "flush_threshold_bytes": 4096,
        "flush_interval_ms": 50,
        "max_chunk_bytes": 8192,
        "read_block_bytes": 4096,
    },
    "cache": {"max_entry_bytes": 4096},
}


@dataclass(frozen=True)
class Txn:
    """The ``index``-th transaction begun so far (modulo their number), whether or not it still
    exists: rules name transactions this way because their names are only known at run time."""

    index: int


@dataclass(frozen=True)
class Payload:
    """Append bytes, generated from a size and a seed so large appends stay cheap to draw and
    shrink, and distinct appends have distinct bytes (a misplaced byte range shows)."""

    size: int
    seed: int

    def bytes(self) -> bytes:
        return random.Random(self.seed).randbytes(self.size)


names = st.sampled_from(NAMES)
segment_refs = st.one_of(names, st.integers(0, 7).map(Txn))
payloads = st.builds(
    Payload,
    st.one_of(st.integers(1, 64), st.integers(1, 3000)),
    st.integers(0, 1 << 16),
)
attribute_values = st.one_of(
    st.integers(-3, 3), st.sampled_from((INT64_MIN, INT64_MAX, INT64_MAX - 1))
)
attribute_updates = st.lists(
    st.fixed_dictionaries(
        {
            "key": st.sampled_from(ATTRIBUTE_KEYS),
            "value": attribute_values,
            "type": st.sampled_from(UPDATE_TYPES),
        },
        optional={"compare": st.one_of(st.none(), attribute_values)},
    ),
    min_size=1,
    max_size=4,
)
append_batches = st.lists(st.tuples(segment_refs, payloads), min_size=2, max_size=8)
initial_attributes = st.dictionaries(st.sampled_from(ATTRIBUTE_KEYS), attribute_values, max_size=2)


async def together(calls: list[Any]) -> list[Any]:
    """Run ``calls`` concurrently, in submission order, and return each result or error."""
    return await asyncio.gather(*calls, return_exceptions=True)


async def later(ticks: int, call: Any) -> Any:
    """``call``, started after ``ticks`` iterations of the event loop."""
    for _ in range(ticks):
        await asyncio.sleep(0)
    return await call


def resolve_attribute_updates(
    current: dict[str, int], updates: list[dict[str, Any]]
) -> tuple[dict[str, int] | None, str | None]:
    """The attributes after ``updates`` (API.md, "Details"), or None and the first failing key.

    Updates of one request see the values of the earlier ones; all apply or none does.
    """
    values = dict(current)
    for update in updates:
        key, value, kind = update["key"], update["value"], update["type"]
        existing = values.get(key)
        if kind == "replace_if_absent" and existing is not None:
            return None, key
        if kind == "replace_if_greater" and existing is not None and value <= existing:
            return None, key
        if kind == "replace_if_equals" and existing != update.get("compare"):
            return None, key
        if kind == "accumulate":
            value = (existing or 0) + value
            if not INT64_MIN <= value <= INT64_MAX:
                return None, key
        values[key] = value
    return values, None


class SegmentStoreMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.directory = tempfile.mkdtemp(prefix="segmentstore-state-machine-")
        # One loop for the machine's life: the store's tasks and futures belong to it.
        self.loop = asyncio.new_event_loop()
        # An exception escaping a callback or task is otherwise only logged, and the call
        # waiting on it hangs: collect them so the step that caused one fails with it.
        self.loop_errors: list[dict[str, Any]] = []
        self.loop.set_exception_handler(lambda _, context: self.loop_errors.append(context))
        self.store: SegmentStore | None = None
        # The model.
        self.data: dict[str, bytearray] = {}
        self.sealed: set[str] = set()
        self.start: dict[str, int] = {}
        self.attributes: dict[str, dict[str, int]] = {}
        # Exactly-once appends: the highest Writer-Seq applied per writer of each segment.
        self.writers: dict[str, dict[str, int]] = {}
        # Every transaction ever begun, in order (Txn refers to them), and its parent.
        self.transactions: list[str] = []
        self.parent: dict[str, str] = {}
        self.epochs: list[int] = []
        self.steps = 0

    # -- plumbing -------------------------------------------------------------------------

    def run(self, coroutine: Any) -> Any:
        try:
            return self.loop.run_until_complete(asyncio.wait_for(coroutine, CALL_TIMEOUT_S))
        finally:
            assert not self.loop_errors, self.loop_errors

    def open_store(self) -> None:
        store = SegmentStore.open(self.directory, **STORE_OPTIONS)
        try:
            self.run(store.start())
        except BaseException:
            # A half-started store still owns logs and tasks: release what it can.
            self.run(together([c.stop() for c in store.containers]))
            raise
        self.store = store
        epochs = [c.epoch for c in store.containers]
        if self.epochs:
            # Each recovery takes the log over with a higher epoch (API.md, :restart).
            assert all(new > old for new, old in zip(epochs, self.epochs, strict=True)), (
                self.epochs,
                epochs,
            )
        self.epochs = epochs

    def teardown(self) -> None:
        try:
            if self.store is not None:
                self.run(self.store.close())
        finally:
            # Anything left (a store that failed half-way) must not outlive the loop.
            pending = asyncio.all_tasks(self.loop)
            for task in pending:
                task.cancel()
            finish = self.loop.run_until_complete
            finish(together(list(pending)))
            finish(self.loop.shutdown_asyncgens())
            finish(self.loop.shutdown_default_executor())
            self.loop.close()
            shutil.rmtree(self.directory, ignore_errors=True)

    @property
    def s(self) -> SegmentStore:
        assert self.store is not None
        return self.store

    def name_of(self, ref: str | Txn) -> str:
        if isinstance(ref, str):
            return ref
        if not self.transactions:
            # A well-formed transaction name that was never begun.
            return f"{NAMES[0]}#transaction.{'0' * 32}"
        name = self.transactions[ref.index % len(self.transactions)]
        note(f"{ref} is {name}")
        return name

    def forget(self, name: str) -> None:
        del self.data[name]
        del self.start[name]
        del self.attributes[name]
        del self.writers[name]
        self.sealed.discard(name)

    def add(self, name: str, attributes: dict[str, int] | None = None) -> None:
        self.data[name] = bytearray()
        self.start[name] = 0
        self.attributes[name] = dict(attributes or {})
        self.writers[name] = {}

    # -- rules ----------------------------------------------------------------------------

    @initialize(initial=st.lists(names, unique=True, max_size=len(NAMES)))
    def open_first(self, initial: list[str]) -> None:
        self.open_store()
        # Start with some segments, or most early steps only meet segment_not_found.
        for name in initial:
            self.create(name, {})

    @rule(name=names, attributes=initial_attributes)
    def create(self, name: str, attributes: dict[str, int]) -> None:
        if name in self.data:
            with pytest.raises(SegmentExistsError):
                self.run(self.s.create_segment(name, attributes=attributes))
            return
        info = self.run(self.s.create_segment(name, attributes=attributes))
        # A deleted name can be created again and starts empty.
        assert (info.name, info.length, info.start_offset, info.sealed) == (name, 0, 0, False)
        assert info.attributes == attributes
        self.add(name, attributes)

    @rule(ref=segment_refs, payload=payloads)
    def append(self, ref: str | Txn, payload: Payload) -> None:
        name = self.name_of(ref)
        data = payload.bytes()
        if name not in self.data:
            with pytest.raises(SegmentNotFoundError):
                self.run(self.s.append(name, data))
        elif name in self.sealed:
            with pytest.raises(SegmentSealedError):
                self.run(self.s.append(name, data))
        else:
            result = self.run(self.s.append(name, data))
            before = len(self.data[name])
            assert (result.offset, result.length) == (before, before + len(data))
            self.data[name] += data

    @rule(ref=segment_refs, payload=payloads, wrong_by=st.integers(-5, 5))
    def conditional_append(self, ref: str | Txn, payload: Payload, wrong_by: int) -> None:
        """``wrong_by == 0`` gives the right ``expected_offset``, anything else a wrong one."""
        name = self.name_of(ref)
        data = payload.bytes()
        length = len(self.data.get(name, b""))
        expected = max(0, length + wrong_by)
        if name not in self.data:
            with pytest.raises(SegmentNotFoundError):
                self.run(self.s.append(name, data, expected_offset=expected))
            return
        sealed, wrong = name in self.sealed, expected != length
        if sealed or wrong:
            # When both apply either refusal is right: API.md does not order them.
            allowed: tuple[type[Exception], ...] = (SegmentSealedError,) * sealed
            allowed += (BadOffsetError,) * wrong
            with pytest.raises(allowed) as refused:
                self.run(self.s.append(name, data, expected_offset=expected))
            if isinstance(refused.value, BadOffsetError):
                assert refused.value.fields() == {"expected_offset": expected, "length": length}
            return
        result = self.run(self.s.append(name, data, expected_offset=expected))
        assert (result.offset, result.length) == (length, length + len(data))
        self.data[name] += data

    @rule(
        ref=segment_refs,
        payload=payloads,
        writer=st.sampled_from(("w1", "w2")),
        seq=st.integers(0, 4),
    )
    def exactly_once_append(self, ref: str | Txn, payload: Payload, writer: str, seq: int) -> None:
        name = self.name_of(ref)
        data = payload.bytes()

        def call() -> Any:
            return self.run(self.s.append(name, data, writer_id=writer, writer_seq=seq))

        if name not in self.data:
            with pytest.raises(SegmentNotFoundError):
                call()
            return
        length = len(self.data[name])
        if seq <= self.writers[name].get(writer, -1):
            # A retry of what is already applied appends nothing, sealed or not, and answers
            # with the current length.
            event("exactly-once: duplicate")
            result = call()
            assert (result.offset, result.length, result.duplicate) == (None, length, True)
            return
        if name in self.sealed:
            with pytest.raises(SegmentSealedError):
                call()
            return
        result = call()
        assert (result.offset, result.length, result.duplicate) == (
            length,
            length + len(data),
            False,
        )
        self.data[name] += data
        self.writers[name][writer] = seq

    @rule(ref=segment_refs)
    def seal(self, ref: str | Txn) -> None:
        name = self.name_of(ref)
        if name not in self.data:
            with pytest.raises(SegmentNotFoundError):
                self.run(self.s.seal(name))
            return
        # Idempotent: sealing a sealed segment succeeds and changes nothing.
        info = self.run(self.s.seal(name))
        assert info.sealed and info.length == len(self.data[name])
        self.sealed.add(name)

    @rule(ref=segment_refs, at=st.integers(0, 1 << 16))
    def truncate(self, ref: str | Txn, at: int) -> None:
        name = self.name_of(ref)
        if name not in self.data:
            with pytest.raises(SegmentNotFoundError):
                self.run(self.s.truncate(name, at))
            return
        length = len(self.data[name])
        # Anywhere from 0 to 5 bytes past the end, so every case is common.
        offset = at % (length + 6)
        if offset > length:
            event("truncate: beyond the end")
        else:
            event("truncate: moves the start" if offset > self.start[name] else "truncate: no-op")
        if offset > length:
            with pytest.raises(OffsetBeyondEndError) as refused:
                self.run(self.s.truncate(name, offset))
            assert refused.value.fields() == {"offset": offset, "length": length}
            return
        info = self.run(self.s.truncate(name, offset))
        # Below the start offset it is a no-op; the start offset never moves back.
        self.start[name] = max(self.start[name], offset)
        assert info.start_offset == self.start[name]

    @rule(ref=segment_refs)
    def begin_transaction(self, ref: str | Txn) -> None:
        """Of a plain segment or, through a ``Txn``, of a transaction (whose own transaction
        is ``TXN#transaction.<id>``, committed into the transaction, not into its root)."""
        parent = self.name_of(ref)
        if parent not in self.data:
            with pytest.raises(SegmentNotFoundError):
                self.run(self.s.begin_transaction(parent))
            return
        too_long = len(parent) + len("#transaction.") + 32 > 255
        if parent in self.sealed or too_long:
            # A transaction of a sealed segment could never be committed; one whose name would
            # be too long is a 400 (API.md is silent on it). Either way nothing is created.
            allowed: tuple[type[Exception], ...] = (SegmentSealedError,) * (parent in self.sealed)
            allowed += (InvalidNameError, InvalidArgumentError) * too_long
            with pytest.raises(allowed):
                self.run(self.s.begin_transaction(parent))
            return
        name = self.run(self.s.begin_transaction(parent))
        assert name.startswith(f"{parent}#transaction.") and name not in self.parent
        note(f"Txn({len(self.transactions)}) is {name}")
        self.transactions.append(name)
        self.parent[name] = parent
        self.add(name)

    @precondition(lambda self: self.transactions)
    @rule(txn=st.integers(0, 7).map(Txn))
    def merge_transaction(self, txn: Txn) -> None:
        source = self.name_of(txn)
        target = self.parent[source]
        if source not in self.data or target not in self.data:
            with pytest.raises(SegmentNotFoundError) as refused:
                self.run(self.s.merge(target, source))
            assert refused.value.name in {source, target} - self.data.keys()
            return
        target_sealed, source_truncated = target in self.sealed, self.start[source] > 0
        if target_sealed or source_truncated:
            allowed: tuple[type[SegmentStoreError], ...] = (SegmentSealedError,) * target_sealed
            allowed += (SegmentTruncatedError,) * source_truncated
            with pytest.raises(allowed) as refusal:
                self.run(self.s.merge(target, source))
            if isinstance(refusal.value, SegmentSealedError):
                assert refusal.value.name == target
            else:
                assert refusal.value.fields() == {"start_offset": self.start[source]}
            event(f"merge refused: {type(refusal.value).__name__}")
            # A refused merge leaves the source's bytes intact, but it may stay sealed.
            if self.run(self.s.get_info(source)).sealed:
                self.sealed.add(source)
            return
        result = self.run(self.s.merge(target, source))
        event("merge committed")
        before, added = len(self.data[target]), len(self.data[source])
        assert (result.offset, result.length) == (before, before + added)
        self.data[target] += self.data[source]
        self.forget(source)

    @rule(ref=segment_refs)
    def delete(self, ref: str | Txn) -> None:
        name = self.name_of(ref)
        if name not in self.data:
            with pytest.raises(SegmentNotFoundError):
                self.run(self.s.delete_segment(name))
            return
        self.run(self.s.delete_segment(name))
        self.forget(name)

    @rule(ref=segment_refs, updates=attribute_updates)
    def update_attributes(self, ref: str | Txn, updates: list[dict[str, Any]]) -> None:
        name = self.name_of(ref)
        if name not in self.data:
            with pytest.raises(SegmentNotFoundError):
                self.run(self.s.update_attributes(name, updates))
            return
        expected, failing_key = resolve_attribute_updates(self.attributes[name], updates)
        if expected is None:
            allowed: tuple[type[Exception], ...] = (BadAttributeUpdateError,)
            allowed += (SegmentSealedError,) * (name in self.sealed)
            with pytest.raises(allowed) as refused:
                self.run(self.s.update_attributes(name, updates))
            if isinstance(refused.value, BadAttributeUpdateError):
                assert refused.value.fields() == {"key": failing_key}
            return
        try:
            answered = self.run(self.s.update_attributes(name, updates))
        except SegmentSealedError:
            # API.md does not say whether a sealed segment's attributes can change; Pravega
            # refuses. Either is accepted, but a refusal must change nothing.
            assert name in self.sealed
            return
        # A successful update answers the full attribute map after it.
        assert answered == expected
        self.attributes[name] = expected

    @rule(
        ref=segment_refs,
        then=st.sampled_from(("append", "seal", "delete")),
        payload=payloads,
    )
    def read_waiting_at_tail(self, ref: str | Txn, then: str, payload: Payload) -> None:
        """A read parked at the tail of an unsealed segment wakes up with the next append's
        bytes, with ``end_of_segment`` if it is sealed, ``segment_not_found`` if deleted."""
        name = self.name_of(ref)
        if name not in self.data or name in self.sealed:
            return
        length, data = len(self.data[name]), payload.bytes()
        change = {
            "append": self.s.append(name, data),
            "seal": self.s.seal(name),
            "delete": self.s.delete_segment(name),
        }
        for unused in set(change) - {then}:
            change[unused].close()  # never awaited
        # The read starts first and parks; the change comes one loop iteration later.
        read = self.s.read(name, length, max_length=1 << 20, wait_ms=TAIL_WAIT_MS)
        woken, changed = self.run(together([read, later(1, change[then])]))
        if isinstance(changed, BaseException):
            raise AssertionError(f"{then} of {name!r} failed") from changed
        event(f"read at the tail woken by {then}")
        if then == "append":
            assert isinstance(woken, bytes | memoryview), woken
            assert len(woken) > 0 and bytes(woken) == data[: len(woken)]
            self.data[name] += data
        elif then == "seal":
            assert isinstance(woken, EndOfSegmentError) and woken.length == length, woken
            self.sealed.add(name)
        else:
            assert isinstance(woken, SegmentNotFoundError), woken
            self.forget(name)

    @rule(batch=append_batches, seal_at=st.none() | st.integers(0, 8))
    def concurrent_appends(
        self, batch: list[tuple[str | Txn, Payload]], seal_at: int | None
    ) -> None:
        """Appends submitted together share batch windows and frames (several per window once
        they pass ``max_frame_bytes``), refusals land in the middle of a window, and a seal
        among them cuts a segment's appends in two."""
        appends = [(self.name_of(ref), payload.bytes()) for ref, payload in batch]
        calls: list[Any] = [self.s.append(name, data) for name, data in appends]
        sealing, at = None, -1
        if seal_at is not None:
            sealing = appends[seal_at % len(appends)][0]
            at = seal_at % (len(calls) + 1)
            calls.insert(at, self.s.seal(sealing))
        outcomes = self.run(together(calls))
        if sealing is not None:
            sealed = outcomes.pop(at)
            if sealing in self.data:
                assert not isinstance(sealed, BaseException), sealed
            else:
                assert isinstance(sealed, SegmentNotFoundError), sealed
        self.settle_appends(appends, outcomes, sealing=sealing)
        if sealing in self.data:
            self.sealed.add(sealing)

    @rule(batch=append_batches, close_at=st.integers(0, 8), ticks=st.integers(0, 6))
    def close_during_appends(
        self, batch: list[tuple[str | Txn, Payload]], close_at: int, ticks: int
    ) -> None:
        """Closing finishes what was accepted and refuses the rest: every acknowledged append
        must be there after the reopen, and nothing that was refused. The appends submitted
        after the close start ``ticks`` loop iterations later, at some point of its progress."""
        appends = [(self.name_of(ref), payload.bytes()) for ref, payload in batch]
        at = close_at % (len(appends) + 1)
        calls: list[Any] = [self.s.append(name, data) for name, data in appends]
        calls[at:] = [later(ticks, call) for call in calls[at:]]
        calls.insert(at, self.s.close())
        outcomes = self.run(together(calls))
        assert outcomes.pop(at) is None
        self.store = None
        self.settle_appends(appends, outcomes, closing=True)
        self.open_store()

    def settle_appends(
        self,
        appends: list[tuple[str, bytes]],
        outcomes: list[AppendResult | BaseException],
        sealing: str | None = None,
        closing: bool = False,
    ) -> None:
        """Check appends that ran concurrently and apply the acknowledged ones to the model.

        API.md does not order concurrent requests, so the returned offsets say in which order
        each segment's appends were applied: they must tile the segment from its old length.
        """
        per_segment: dict[str, list[tuple[bytes, AppendResult | BaseException]]] = defaultdict(list)
        for (name, data), outcome in zip(appends, outcomes, strict=True):
            per_segment[name].append((data, outcome))
        for name, results in per_segment.items():
            refusals: tuple[type[BaseException], ...] = (ContainerUnavailableError,) * closing
            if name not in self.data:
                refusals += (SegmentNotFoundError,)
            elif name in self.sealed or name == sealing:
                refusals += (SegmentSealedError,)
            done: list[tuple[bytes, AppendResult]] = []
            for data, outcome in results:
                if isinstance(outcome, BaseException):
                    if not isinstance(outcome, refusals):
                        raise AssertionError(f"append to {name!r} refused") from outcome
                    event(f"concurrent append refused: {type(outcome).__name__}")
                else:
                    done.append((data, outcome))
            if not done:
                continue
            assert name in self.data and name not in self.sealed, (name, done)
            for data, result in sorted(done, key=lambda item: item[1].offset or 0):
                length = len(self.data[name])
                assert (result.offset, result.length) == (length, length + len(data)), name
                self.data[name] += data

    @rule()
    def close_and_reopen(self) -> None:
        self.run(self.s.close())
        # Not set again until the new store is up, so teardown never closes a store twice.
        self.store = None
        self.open_store()
        event(f"reopened with {min(len(self.data), 3)}+ segments")

    @rule(container=st.integers(0, STORE_OPTIONS["containers"] - 1))
    def restart_container(self, container: int) -> None:
        before = self.s.container(container).epoch
        restarted = self.run(self.s.restart_container(container))
        assert restarted.status is ContainerStatus.RUNNING, restarted.failure
        assert restarted.epoch > before
        self.epochs[container] = restarted.epoch

    # -- invariants -----------------------------------------------------------------------

    @invariant()
    def containers_are_consistent(self) -> None:
        if self.store is None:
            return
        for container in self.store.containers:
            assert container.status is ContainerStatus.RUNNING, container.failure
            container.durable_metadata.check_invariants()
        assert sum(c.segment_count for c in self.store.containers) == len(self.data)

    @invariant()
    def listing_matches(self) -> None:
        if self.store is None:
            return
        assert self.run(self.s.list_segments()) == sorted(self.data)
        names = sorted(self.data)
        assert self.run(self.s.list_segments("scope/")) == [
            n for n in names if n.startswith("scope/")
        ]
        # Paginated: each page continues after the last name of the previous one.
        pages: list[str] = []
        while True:
            after = pages[-1] if pages else None
            page = self.run(self.s.list_segments(after=after, limit=2))
            assert len(page) <= 2
            if not page:
                break
            pages += page
        assert pages == names

    @invariant()
    def segments_match(self) -> None:
        if self.store is None:
            return
        self.steps += 1
        # Deterministic per step (so a failure replays), yet different read sizes each step.
        chunks = random.Random(self.steps)
        for name, data in self.data.items():
            self.check_segment(name, data, chunks)
        for name in NAMES:
            if name not in self.data:
                with pytest.raises(SegmentNotFoundError):
                    self.run(self.s.get_info(name))
                with pytest.raises(SegmentNotFoundError):
                    self.run(self.s.read(name, 0))

    def check_segment(self, name: str, data: bytearray, chunks: random.Random) -> None:
        store, start, length, sealed = self.s, self.start[name], len(data), name in self.sealed
        info = self.run(store.get_info(name))
        assert (info.name, info.length, info.start_offset, info.sealed) == (
            name,
            length,
            start,
            sealed,
        )
        assert 0 <= info.storage_length <= info.length
        assert info.attributes == self.attributes[name]
        assert self.run(store.get_attributes(name)) == self.attributes[name]

        # Everything readable, in chunks of assorted sizes; a read may return fewer bytes.
        offset = start
        while offset < length:
            max_length = chunks.choice((1, 7, 100, 1000, 4096, 1 << 20))
            piece = self.run(store.read(name, offset, max_length))
            # Below the length a read returns at least one byte, wherever the bytes are.
            assert 0 < len(piece) <= max_length, (name, offset, max_length, len(piece), info)
            assert bytes(piece) == data[offset : offset + len(piece)], (name, offset)
            offset += len(piece)
        if start < length:
            # And from an offset in the middle, which may fall inside one append's bytes.
            middle = chunks.randint(start, length - 1)
            piece = self.run(store.read(name, middle, length - middle))
            assert bytes(piece) == data[middle : middle + len(piece)] and len(piece) > 0

        if start > 0:
            for below in (0, start - 1):
                with pytest.raises(SegmentTruncatedError) as refused:
                    self.run(store.read(name, below))
                assert refused.value.fields() == {"start_offset": start}
        if sealed:
            with pytest.raises(EndOfSegmentError) as ended:
                self.run(store.read(name, length))
            assert ended.value.fields() == {"length": length}
        else:
            assert len(self.run(store.read(name, length, wait_ms=0))) == 0
        # Past the end is an error; which of the two 416 codes, API.md does not pin down.
        with pytest.raises((OffsetBeyondEndError, EndOfSegmentError)):
            self.run(store.read(name, length + 1))


@pytest.mark.slow
# A passing run takes well under a minute, but shrinking a failure can take Hypothesis its full
# five minutes of shrinking: let it finish rather than lose the minimal example to the timeout.
@pytest.mark.timeout(900)
class TestSegmentStoreStateMachine(SegmentStoreMachine.TestCase):  # type: ignore[misc, valid-type]
    # Every append waits for an fsync: about 45 s on two cores (1000 examples of 80 steps,
    # 5.5 min, also pass: raise these locally to explore further).
    settings = settings(
        max_examples=200,
        stateful_step_count=50,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
