"""The victim of the eviction kill test: a store whose segments keep leaving memory and coming
back, killed with SIGKILL at one step of an eviction or a load.

Run as ``python -m tests.integration.eviction_victim DATA_DIR STEP`` from the repository root.
It creates a few segments (attributes set), prints ``READY``, then appends exactly-once
records to them, lets them go idle and leave
memory, appends to them again (which loads them back), and so on, printing after every
acknowledged append

    ACK <segment> <offset> <writer seq> <hex of the bytes>

At the first moment that STEP happens it prints ``KILLED <STEP>`` and kills itself with SIGKILL.
STEP is one of :data:`STEPS`.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any

from segmentstore import SegmentStore
from segmentstore.containers.active_segments import ActiveSegments
from segmentstore.containers.commit_effects import CommitEffects
from segmentstore.containers.container import SegmentContainer
from segmentstore.logs.durable_log import DurableLog
from segmentstore.logs.metadata_operations import LoadSegmentOperation
from segmentstore.writer.segment_flusher import SegmentFlusher

SEGMENTS = [f"evict/{i}" for i in range(6)]
ATTRIBUTES = {"owner": 42}
WRITER = "victim"
OPTIONS: dict[str, Any] = {
    "metadata": {"idle_eviction_ms": 100},
    "storage_writer": {"flush_interval_ms": 20},
    "durable_log": {"checkpoint_every_frames": 4},
    "tier1": {"segment_bytes": 16 * 1024},
}
STEPS = (
    "state_saved",  # the manifest keeps the segment's state; memory still holds it
    "evicted",  # the segment left memory; no checkpoint has said so yet
    "checkpointed",  # the checkpoint after an eviction round is durable
    "truncated",  # Tier 1 was truncated at that checkpoint
    "loaded",  # an inactive segment came back into memory, Tier 1 knows nothing of it yet
    "load_logged",  # its LoadSegmentOperation is durable (a change to it follows)
)


def _die(step: str) -> None:
    sys.stdout.write(f"KILLED {step}\n")
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def _after(owner: Any, method: str, step: str) -> None:
    original = getattr(owner, method)
    if asyncio.iscoroutinefunction(original):

        async def wrapped_async(*args: Any, **kwargs: Any) -> Any:
            result = await original(*args, **kwargs)
            _die(step)
            return result

        setattr(owner, method, wrapped_async)
    else:

        def wrapped(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            _die(step)
            return result

        setattr(owner, method, wrapped)


def arm(step: str) -> None:
    if step == "state_saved":
        # The write of its last bytes may carry the state already (no save_state follows).
        original_save = SegmentFlusher._save

        def save(self: SegmentFlusher, manifest: Any) -> None:
            original_save(self, manifest)
            if self.complete:
                _die(step)

        SegmentFlusher._save = save  # type: ignore[method-assign]
    elif step == "evicted":
        _after(SegmentContainer, "evict", step)
    elif step == "checkpointed":
        original_round = ActiveSegments.evict_round

        def evict_round(self: ActiveSegments) -> tuple[int, int]:
            evicted, active = original_round(self)
            if evicted:
                _after(SegmentContainer, "checkpoint", step)  # the round's checkpoint follows
            return evicted, active

        ActiveSegments.evict_round = evict_round  # type: ignore[method-assign]
    elif step == "truncated":
        _after(DurableLog, "_truncate", step)
    elif step == "loaded":
        _after(SegmentContainer, "insert", step)
    elif step == "load_logged":
        # (The container handed its bound _commit to its Durable Log when it started: the
        # effects it calls are looked up at each commit.)
        original_commit = CommitEffects.commit

        def commit(self: CommitEffects, ops: list[Any], metadata: Any) -> None:
            original_commit(self, ops, metadata)
            if any(isinstance(op, LoadSegmentOperation) for op in ops):
                _die(step)

        CommitEffects.commit = commit  # type: ignore[method-assign]
    else:
        raise SystemExit(f"unknown step {step!r}")


async def run(data_dir: Path, step: str) -> None:
    async with SegmentStore.open(data_dir, containers=1, **OPTIONS) as store:
        for name in SEGMENTS:
            if name not in await store.list_segments("evict/"):
                await store.create_segment(name, attributes=ATTRIBUTES)
        arm(step)  # the segments exist: from here on, the step may come at any moment
        sys.stdout.write("READY\n")
        sys.stdout.flush()
        seq = 0
        while True:
            for name in SEGMENTS:
                seq += 1
                data = f"{name}:{seq};".encode()
                result = await store.append(name, data, writer_id=WRITER, writer_seq=seq)
                if not result.duplicate:
                    sys.stdout.write(f"ACK {name} {result.offset} {seq} {data.hex()}\n")
                    sys.stdout.flush()
            await asyncio.sleep(0.3)  # long enough for every segment to leave memory


if __name__ == "__main__":
    asyncio.run(run(Path(sys.argv[1]), sys.argv[2]))
