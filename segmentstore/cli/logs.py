"""One log format for the whole process: the service's own records and uvicorn's alike.

``text`` is one line per record for people (``time level logger: message``); ``json`` is one
JSON object per line for log pipelines, with ``time`` (UTC, ISO 8601), ``level``, ``logger``,
``message`` and, for an error with a traceback, ``exception``. uvicorn is then run without
handlers of its own (``uvicorn_logging=False``), so its records reach the same root handler.

A worker of a node of several (``serve --workers N``) names itself in every record: ``[w1]``
after the level in text, ``"worker": "w1"`` in JSON.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Literal

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
WORKER_TEXT_FORMAT = "%(asctime)s %(levelname)s [{worker}] %(name)s: %(message)s"


class JsonFormatter(logging.Formatter):
    def __init__(self, worker: str | None = None) -> None:
        super().__init__()
        self.worker = worker

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if self.worker is not None:
            entry["worker"] = self.worker
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


class _Installed:
    handler: logging.Handler | None = None


def configure_logging(
    level: str = "info", log_format: Literal["text", "json"] = "text", worker: str | None = None
) -> None:
    """Send every record at ``level`` or above to standard error in ``log_format``; each
    record names ``worker``, if given.

    Called again, it replaces its own handler (and no other: a host's, e.g. a test runner's
    capture, stays).
    """
    handler = logging.StreamHandler(sys.stderr)
    text = TEXT_FORMAT if worker is None else WORKER_TEXT_FORMAT.format(worker=worker)
    formatter = JsonFormatter(worker) if log_format == "json" else logging.Formatter(text)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    if _Installed.handler is not None:
        root.removeHandler(_Installed.handler)
    _Installed.handler = handler
    root.addHandler(handler)
    root.setLevel(level.upper())
    # httpx logs every request it makes at INFO: a line per probe, forward or listing says
    # nothing an operator acts on (its warnings still show).
    logging.getLogger("httpx").setLevel(logging.WARNING)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        uvicorn_logger = logging.getLogger(name)
        uvicorn_logger.handlers.clear()
        uvicorn_logger.propagate = True
