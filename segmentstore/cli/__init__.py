"""The command line: the composition root that alone builds settings and the store.

One module per command group (:mod:`.serve`, :mod:`.tier2`, :mod:`.bench`, :mod:`.spark`,
:mod:`.drill`);
each adds its parser and sets the function that runs it. It alone reads the environment.
May import: ``config``, ``store``, ``tier2``, ``contracts``, ``vocabulary``, and lazily (so
that ``segmentstore tier2 cat`` never loads FastAPI or Spark) ``api``, ``jobs``, ``cluster``,
``bench`` and ``drill``.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import NoReturn

from segmentstore.cli import bench, drill, serve, spark, tier2
from segmentstore.cli.logs import configure_logging
from segmentstore.version import VERSION


class _OneLineErrors(argparse.ArgumentParser):
    """A usage error is one line that names the mistake and where the flags are listed (its
    subcommands' parsers are of this class too), exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} ({self.prog} --help lists the flags)\n")


def _parser() -> argparse.ArgumentParser:
    parser = _OneLineErrors(prog="segmentstore", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"segmentstore {VERSION}")
    commands = parser.add_subparsers(dest="command", required=True)
    for group in (serve, tier2, bench, spark, drill):
        group.add_command(commands)
    return parser


# a module that only an extra installs -> that extra
_EXTRAS = {
    **dict.fromkeys(
        [
            "pydantic",
            "yaml",
            "crc32c",
            "pyarrow",
            "boto3",
            "botocore",
            "fastapi",
            "uvicorn",
            "rich",
        ],
        "server",
    ),
    "pyspark": "spark",
    "nats": "cluster",
    "moto": "drill",
    "lmdb": "cache",
}


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if not logging.getLogger().handlers:  # a host's logging (a test runner's) stays as it is
        # ``serve`` configures it again from its settings (log.level, log.format).
        configure_logging()
    try:
        code: int = args.run(args)
    except ModuleNotFoundError as missing:
        extra = _EXTRAS.get((missing.name or "").split(".")[0])
        if extra is None:
            raise
        print(
            f"segmentstore {args.command}: needs {missing.name}, which this install lacks;"
            f" install it with: pip install 'segmentstore[{extra}]'",
            file=sys.stderr,
        )
        return 2
    return code
