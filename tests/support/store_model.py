"""The model side of the store's Hypothesis state machine (tests/store/test_store_state_machine.py):
the store's settings, the vocabulary rules draw from, and a base machine that owns the store,
the model, the plumbing and the invariants that compare the two (``tests/support`` is on
pytest's ``pythonpath``)."""

from __future__ import annotations

import asyncio
import random
import shutil
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import event, note
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant

from segmentstore import (
    AppendResult,
    ContainerUnavailableError,
    EndOfSegmentError,
    OffsetBeyondEndError,
    SegmentNotFoundError,
    SegmentSealedError,
    SegmentStore,
    SegmentTruncatedError,
)
from segmentstore.containers.status import ContainerStatus

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
    """The attributes after ``updates`` (docs/api.md, "Details"), or None and the first failing key.

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


class StoreMachineBase(RuleBasedStateMachine):
    """The store, the model of it, and the invariants; the rules come in subclasses."""

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
            # Each recovery takes the log over with a higher epoch (docs/api.md, :restart).
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

    # -- checking concurrent appends -------------------------------------------------------

    def settle_appends(
        self,
        appends: list[tuple[str, bytes]],
        outcomes: list[AppendResult | BaseException],
        sealing: str | None = None,
        closing: bool = False,
    ) -> None:
        """Check appends that ran concurrently and apply the acknowledged ones to the model.

        docs/api.md does not order concurrent requests, so the returned offsets say in which order
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
        # Past the end is an error; which of the two 416 codes, docs/api.md does not pin down.
        with pytest.raises((OffsetBeyondEndError, EndOfSegmentError)):
            self.run(store.read(name, length + 1))
