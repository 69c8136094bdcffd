"""``segmentstore bench tier1``: the store on the replicated JetStream Tier 1 against the local one.

The bench starts a three-node JetStream cluster on loopback (``nats-server`` from the
``cluster`` extra, ``sync_interval: always``: every acknowledged record is on the disks of two
nodes), then runs the same appends through the embedded store with Tier 1 on local files and on
JetStream, alternating for ``rounds`` rounds, and reports the medians and the ratio
JetStream / local. All three nodes share this machine's cores and disk with the store, so the
ratio understates what three machines would do: three replicas write every byte three times
to the one disk. ``replicas`` below 3 shows what those copies cost.
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
from pathlib import Path
from typing import Any

from segmentstore.bench.append import run_store
from segmentstore.bench.report import print_table, run_loop, write_json
from segmentstore.harness.jetstream_cluster import JetStreamCluster

# (payload bytes, writers): many small appends batched into frames, and large ones.
CASES = ((1024, 256), (1 << 20, 16))


def run(
    seconds: float,
    rounds: int,
    segments: int,
    directory: str | None,
    json_path: str | None,
    loop: str = "uvloop",
    replicas: int = 3,
) -> list[dict[str, Any]]:
    base = Path(tempfile.mkdtemp(prefix="bench-tier1-", dir=directory))
    cluster = JetStreamCluster(base / "jetstream")
    rows: list[dict[str, Any]] = []
    try:
        print("... starting a three-node JetStream cluster on loopback", flush=True)
        cluster.start()
        for size, writers in CASES:
            local: list[float] = []
            jetstream: list[float] = []
            for round_ in range(1, rounds + 1):
                label = f"... {size} B x {writers} writers, round {round_}/{rounds}"
                case = base / f"{size}-{writers}-{round_}"
                print(f"{label}: local Tier 1", flush=True)
                result = run_loop(run_store(case / "local", size, writers, segments, seconds), loop)
                local.append(result["appends_per_s"])
                print(f"{label}: JetStream Tier 1 ({replicas} replicas)", flush=True)
                tier1 = {
                    "mode": "jetstream",
                    "jetstream": {
                        "servers": cluster.servers,
                        "stream_prefix": f"bench{size}x{writers}r{round_}",
                        "replicas": replicas,
                    },
                }
                result = run_loop(
                    run_store(case / "jetstream", size, writers, segments, seconds, tier1=tier1),
                    loop,
                )
                jetstream.append(result["appends_per_s"])
                shutil.rmtree(case, ignore_errors=True)
            local_rate, jetstream_rate = statistics.median(local), statistics.median(jetstream)
            rows.append(
                {
                    "size_bytes": size,
                    "writers": writers,
                    "local_appends_per_s": local_rate,
                    "local_mb_per_s": local_rate * size / 1e6,
                    "jetstream_appends_per_s": jetstream_rate,
                    "jetstream_appends_per_s_min": min(jetstream),
                    "jetstream_mb_per_s": jetstream_rate * size / 1e6,
                    "ratio": jetstream_rate / local_rate,
                }
            )
    finally:
        cluster.stop()
        shutil.rmtree(base, ignore_errors=True)
    print_table(
        rows,
        [
            ("size_bytes", "size", "d"),
            ("writers", "writers", "d"),
            ("local_appends_per_s", "local/s", ",.0f"),
            ("local_mb_per_s", "local MB/s", ".1f"),
            ("jetstream_appends_per_s", "jetstream/s", ",.0f"),
            ("jetstream_appends_per_s_min", "min", ",.0f"),
            ("jetstream_mb_per_s", "js MB/s", ".1f"),
            ("ratio", "js/local", ".2f"),
        ],
    )
    write_json(json_path, "tier1", rows)
    return rows
