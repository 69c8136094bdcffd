"""Why ``segmentstore serve`` cannot start, in one line on standard error that names the cause
and the fix, and its exit status: 2 for usage and settings (a flag, a value, a Tier 2 URI that
no backend takes), 1 for everything else (the port taken, the data directory unusable or held
by another process, a foreign or damaged ``store.json``, Tier 1 lost, JetStream or Tier 2 out of
reach). No traceback, unless the log level is ``debug``.

The port is bound first (:func:`listen`), before the data directory is touched, so that a node
that cannot serve never claims, creates or changes anything.
"""

from __future__ import annotations

import errno
import socket
import sys
import traceback

USAGE = 2
FAILURE = 1


class StartupFailure(Exception):
    """A failure to start, already worded for a person: ``str()`` is the line to print."""

    def __init__(self, line: str, exit_code: int = FAILURE) -> None:
        super().__init__(line)
        self.exit_code = exit_code


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` and listening; a :class:`StartupFailure` naming the
    port if it cannot be had."""
    try:
        infos = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
        return socket.create_server((host, port), family=infos[0][0])
    except socket.gaierror as error:
        raise StartupFailure(
            f"cannot listen on {host}:{port}: no such address ({error.strerror}): give --host"
            " (api.host) an address of this machine",
            USAGE,
        ) from error
    except OSError as error:
        if error.errno == errno.EADDRINUSE:
            why = "another process listens on that port"
            fix = "stop it, or choose another port with --port (api.port)"
        elif error.errno == errno.EACCES:
            why = "this user may not listen on a port below 1024"
            fix = "choose a port of 1024 or more with --port (api.port)"
        else:
            why = error.strerror or str(error)
            fix = "check --host and --port (api.host, api.port)"
        raise StartupFailure(f"cannot listen on {host}:{port}: {why}: {fix}") from error


def explain(error: BaseException) -> StartupFailure:
    """``error``, raised while the node started, as the line to print. The store's own
    refusals (``SegmentStoreError``s: a data directory that cannot be used, Tier 1 lost,
    JetStream out of reach, a Tier 2 that is not the cluster's, ...) are worded for a person
    already; anything else is a bug, and says where its traceback is."""
    from segmentstore.contracts.errors import SegmentStoreError

    if isinstance(error, StartupFailure):
        return error
    if isinstance(error, SegmentStoreError):
        return StartupFailure(error.message)
    if isinstance(error, OSError):
        where = f" ({error.filename})" if error.filename else ""
        return StartupFailure(
            f"{error.strerror or error}{where}: check that the node's directories exist and"
            " are writable (--log-level debug shows where)"
        )
    return StartupFailure(
        f"could not start: {type(error).__name__}: {error} (a bug: run with --log-level debug"
        " for the traceback, and report it)"
    )


def report(failure: StartupFailure, cause: BaseException | None, debug: bool) -> int:
    """Print ``failure`` (and, when ``debug``, the traceback of ``cause``); its exit status."""
    if debug and cause is not None:
        traceback.print_exception(cause, file=sys.stderr)
    print(f"segmentstore serve: {failure}", file=sys.stderr)
    return failure.exit_code
