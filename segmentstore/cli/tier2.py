"""``segmentstore tier2 ls|cat``: Tier 2 read through its manifests, with no service."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any


def add_command(commands: Any) -> None:
    tier2 = commands.add_parser("tier2", help="read Tier 2 directly, without the service")
    tier2_commands = tier2.add_subparsers(dest="tier2_command", required=True)
    ls = tier2_commands.add_parser("ls", help="segments with manifests under a Tier 2 URI")
    ls.add_argument("uri", help="file:///path, s3://bucket/prefix, hdfs://host:port/path")
    ls.add_argument("--prefix", default="", help="only names starting with this")
    cat = tier2_commands.add_parser("cat", help="a segment's bytes, read through its manifest")
    cat.add_argument("uri")
    cat.add_argument("name")
    cat.add_argument("--offset", type=int, default=None, help="default: the start offset")
    cat.add_argument("--length", type=int, default=None, help="default: to the storage length")
    migrate = tier2_commands.add_parser(
        "migrate",
        help="rewrite a Tier 2 of an earlier version's layout (every node stopped; repeatable)",
    )
    migrate.add_argument("uri")
    for command in (ls, cat, migrate):
        command.add_argument(
            "--option",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="backend option, e.g. endpoint_url=http://127.0.0.1:9000 (repeatable)",
        )
        command.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from segmentstore.cli import tier2_tools

    logging.disable(logging.INFO)  # stdout carries the data
    options = dict(option.split("=", 1) for option in args.option)
    if args.tier2_command == "ls":
        return tier2_tools.list_segments(args.uri, args.prefix, options, sys.stdout)
    if args.tier2_command == "migrate":
        return tier2_tools.migrate(args.uri, options, sys.stdout)
    return tier2_tools.cat_segment(
        args.uri, args.name, args.offset, args.length, options, sys.stdout.buffer
    )
