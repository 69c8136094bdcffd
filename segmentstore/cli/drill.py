"""``segmentstore drill ...``: a recovery drill against a deployment it spawns or one that runs.

Exit status: 0 if nothing acknowledged was lost, torn or duplicated and every fault healed
within ``--max-recovery-s``; 1 otherwise; 2 if the drill could not run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any


def add_command(commands: Any) -> None:
    drill = commands.add_parser(
        "drill",
        help="load a deployment, break it, and prove nothing acknowledged was lost",
        description=__doc__.splitlines()[0] if __doc__ else None,
    )
    where = drill.add_mutually_exclusive_group()
    where.add_argument("--spawn", action="store_true", help="start a deployment in a temp dir")
    where.add_argument("--url", action="append", help="a running node's URL (repeatable)")
    drill.add_argument(
        "--nodes", type=int, default=1,
        help="with --spawn: 1 node, or a cluster of N >= 2 nodes over a 3-node JetStream cluster",
    )  # fmt: skip
    drill.add_argument(
        "--workers", type=int, default=1,
        help="with --spawn: each node's worker processes (serve --workers N; the worker_kill"
        " fault kills one)",
    )  # fmt: skip
    drill.add_argument(
        "--lease-ms", type=int, default=5000,
        help="a spawned cluster's lease: how long a silent node keeps its containers",
    )  # fmt: skip
    drill.add_argument(
        "--tier2", choices=["file", "s3"], default="file",
        help="spawned Tier 2: a directory on a small file system, or S3 on a moto server",
    )  # fmt: skip
    drill.add_argument(
        "--tier1", choices=["local", "jetstream"], default="local",
        help="a spawned node's Tier 1: its own disk, or a JetStream cluster of three servers"
        " (whose faults are kill, container_restart, jetstream_power_loss)",
    )  # fmt: skip
    drill.add_argument(
        "--jetstream-sync", choices=["always", "default"], default="always",
        help="with --tier1 jetstream: the servers' sync_interval (default: NATS's own, which"
        " syncs every two minutes, to show what a power loss then costs)",
    )  # fmt: skip
    drill.add_argument(
        "--fs-model", choices=["strict", "journaled"], default=None,
        help="what a power loss keeps of names: strict (POSIX: only an fsync of the directory"
        " makes a name durable; the default) or journaled (any fsync does, as on ext4; the"
        " default of --tier1 jetstream, because NATS relies on it)",
    )  # fmt: skip
    drill.add_argument(
        "--kill-cmd", default=None,
        help="with --url: kills a node, {node} replaced by its host:port",
    )  # fmt: skip
    token = drill.add_mutually_exclusive_group()
    token.add_argument(
        "--token-file", type=Path, default=None,
        help="with --url: a file holding the bearer token the drill sends (role admin, for"
        " container restarts; write enough without them)",
    )  # fmt: skip
    token.add_argument(
        "--token", default=None,
        help="the token itself (seen by anyone who lists processes: prefer --token-file, or"
        " $SEGMENTSTORE_DRILL_TOKEN)",
    )  # fmt: skip
    drill.add_argument("--duration", type=float, default=60.0, help="seconds of load and faults")
    drill.add_argument("--seed", type=int, default=1, help="chooses the faults and their moments")
    drill.add_argument(
        "--faults", default=None,
        help="comma-separated kinds (default: all the deployment has; see"
        " `segmentstore drill --list-faults`)",
    )  # fmt: skip
    drill.add_argument(
        "--list-faults", action="store_true",
        help="print every fault kind, what it does and which deployments have it, and exit",
    )  # fmt: skip
    drill.add_argument("--segments", type=int, default=16)
    drill.add_argument("--writers", type=int, default=8)
    drill.add_argument("--readers", type=int, default=2)
    drill.add_argument("--max-recovery-s", type=float, default=60.0)
    drill.add_argument(
        "--hold-s", type=float, nargs=2, default=(2.0, 4.0), metavar=("MIN", "MAX"),
        help="how long an outage or a full disk is held (drawn between MIN and MAX)",
    )  # fmt: skip
    drill.add_argument(
        "--pause-s", type=float, nargs=2, default=(1.0, 4.0), metavar=("MIN", "MAX"),
        help="the quiet time between one fault's healing and the next (drawn between MIN and"
        " MAX); a soak of an hour spreads its faults out with e.g. --pause-s 20 40",
    )  # fmt: skip
    drill.add_argument(
        "--sample-s", type=float, default=10.0,
        help="how often the nodes' descriptors, threads, memory, sockets and the"
        " deployment's JetStream consumers are sampled",
    )  # fmt: skip
    drill.add_argument("--json", type=Path, default=None, help="also write the report here")
    drill.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import logging

    from rich.console import Console

    from segmentstore.drill.deployment import (
        Deployment,
        RunningDeployment,
        SpawnedDeployment,
        checkpoint_every_frames,
    )
    from segmentstore.drill.faults import FAULTS, kinds_for
    from segmentstore.drill.progress import DrillProgress
    from segmentstore.drill.runner import DrillOptions, run_drill

    if args.list_faults:
        for cls in FAULTS.values():
            print(f"{cls.describe()} [{', '.join(sorted(cls.shapes))}]")
        return 0
    if not (args.spawn or args.url):
        print("segmentstore drill: --spawn or --url is needed", file=sys.stderr)
        return 2
    # One line per request (the drill's, and moto's) would bury the progress display.
    for chatty in ("httpx", "werkzeug"):
        logging.getLogger(chatty).setLevel(logging.WARNING)
    if args.workers < 1 or (args.workers > 1 and not args.spawn):
        print("segmentstore drill: --workers is 1, or N >= 2 with --spawn", file=sys.stderr)
        return 2
    if args.nodes < 1 or (args.nodes > 1 and not args.spawn):
        print("segmentstore drill: --nodes is 1, or N >= 2 with --spawn (a cluster)",
              file=sys.stderr)  # fmt: skip
        return 2
    jetstream_node = args.tier1 == "jetstream" and args.nodes == 1
    if jetstream_node and args.workers > 1:
        print("segmentstore drill: --workers is for a node on local Tier 1 or a cluster",
              file=sys.stderr)  # fmt: skip
        return 2
    if jetstream_node and not args.spawn:
        print("segmentstore drill: --tier1 jetstream spawns its node (--spawn)", file=sys.stderr)
        return 2
    shape = "cluster" if args.nodes > 1 else "jetstream_node" if jetstream_node else "node"
    shape = shape if args.spawn else "running"
    default = kinds_for(shape)
    faults = default if args.faults is None else tuple(k.strip() for k in args.faults.split(","))
    unknown = sorted(set(faults) - set(FAULTS))
    if unknown:
        print(f"segmentstore drill: unknown fault kinds {unknown}; known: {list(FAULTS)}",
              file=sys.stderr)  # fmt: skip
        return 2
    deployment: Deployment
    checkpoint_frames = checkpoint_every_frames(args.seed)
    if args.nodes > 1:
        from segmentstore.drill.cluster_deployment import SpawnedCluster

        checkpoints = {"SEGMENTSTORE_DURABLE_LOG__CHECKPOINT_EVERY_FRAMES": str(checkpoint_frames)}
        deployment = SpawnedCluster(
            args.tier2, args.nodes, os.environ, args.lease_ms,
            settings=checkpoints, workers=args.workers,
        )  # fmt: skip
    elif jetstream_node:
        from segmentstore.drill.jetstream_power import SpawnedJetStreamNode

        sync = None if args.jetstream_sync == "default" else "always"
        deployment = SpawnedJetStreamNode(
            sync, args.fs_model or "journaled", checkpoint_frames=checkpoint_frames
        )
    elif args.spawn:
        power_loss = "power_loss" in faults
        deployment = SpawnedDeployment(
            args.tier2, None, power_loss, args.fs_model or "strict", checkpoint_frames,
            args.workers,
        )  # fmt: skip
    else:
        deployment = RunningDeployment(args.url, args.kill_cmd)
    try:
        token = _token(args)
    except OSError as error:
        print(f"segmentstore drill: cannot read --token-file: {error}", file=sys.stderr)
        return 2
    options = DrillOptions(
        token=token,
        duration_s=args.duration,
        seed=args.seed,
        faults=faults,
        segments=args.segments,
        writers=args.writers,
        readers=args.readers,
        max_recovery_s=args.max_recovery_s,
        hold_s=tuple(args.hold_s),
        pause_s=tuple(args.pause_s),
        sample_s=args.sample_s,
    )
    # A drill stopped by `kill` cleans up as one stopped by Ctrl-C: asyncio.run cancels it on
    # SIGINT, and the drill stops what it spawned (processes, mounts) on its way out. SIGINT's
    # own handler is put back first: a shell starts a background job (`drill ... &`, nohup)
    # with SIGINT ignored, and such a drill then ignored SIGTERM too and ran on.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, lambda *_: signal.raise_signal(signal.SIGINT))
    try:
        with DrillProgress(args.duration) as progress:
            report = asyncio.run(run_drill(deployment, options, progress))
    except RuntimeError as error:
        print(f"segmentstore drill: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("segmentstore drill: stopped before its end; what it spawned is stopped",
              file=sys.stderr)  # fmt: skip
        return 130
    report.print_table(Console())
    if args.json is not None:
        report.write_json(args.json)
    return 0 if report.passed else 1


def _token(args: argparse.Namespace) -> str | None:
    """The bearer token for the deployment's API: a flag, a file, or the environment."""
    if args.token_file is not None:
        return args.token_file.read_text().strip() or None
    return args.token or os.environ.get("SEGMENTSTORE_DRILL_TOKEN") or None
