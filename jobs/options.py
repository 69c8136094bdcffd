"""The options of the ``segmentstore`` data source, parsed and checked once, on the driver.

=========================== ===============================================================
``tier2``                   the Tier 2 URI (``file:///path``, ``s3://bucket/prefix``, ...)
``tier2.<option>``          a backend option of :func:`segmentstore.tier2.open_chunk_storage`, as
text:
                            ``tier2.endpoint_url``, ``tier2.access_key``,
                            ``tier2.secret_key``, ``tier2.region``, ``tier2.session_token``...
``segments``                comma-separated names; an item ending in ``*`` is a name prefix
                            (``scope/stream/*``; ``*`` alone is every segment)
``mode``                    ``events`` (default: decode the event framing) or ``bytes``
``starting_offsets``        ``earliest`` (default: each segment's start offset) or JSON
                            ``{"segment": offset}``; unnamed segments start at earliest;
                            ``-2`` means earliest and ``-1`` latest, as in Kafka's source
``ending_offsets``          ``latest`` (default: each segment's storage length) or JSON, as
                            above; never past the storage length of the snapshot
``fail_on_data_loss``       ``true`` (default) or ``false``: skip, count and log missing chunks
                            and truncated ranges instead of failing
=========================== ===============================================================

In events mode a starting offset must be an event boundary; the scan proves it (and every
split) by landing exactly on the next one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from segmentstore.jobs.errors import ScanOptionsError

EARLIEST = -2
LATEST = -1
MODES = ("events", "bytes")
_TIER2_PREFIX = "tier2."
_KNOWN = {"tier2", "segments", "mode", "starting_offsets", "ending_offsets", "fail_on_data_loss"}


@dataclass(frozen=True)
class SegmentSelection:
    """Exact names and name prefixes; a segment is selected if it matches either."""

    names: tuple[str, ...]
    prefixes: tuple[str, ...]

    @staticmethod
    def parse(text: str) -> SegmentSelection:
        items = [item.strip() for item in text.split(",") if item.strip()]
        if not items:
            raise ScanOptionsError("option segments names no segment")
        names = tuple(dict.fromkeys(i for i in items if not i.endswith("*")))
        prefixes = tuple(dict.fromkeys(i[:-1] for i in items if i.endswith("*")))
        for item in (*names, *prefixes):
            if "*" in item:
                raise ScanOptionsError(f"segments: {item!r}: '*' may only end a prefix")
        return SegmentSelection(names, prefixes)


@dataclass(frozen=True)
class ScanOptions:
    tier2_uri: str
    tier2_options: dict[str, str] = field(repr=False)  # may hold credentials
    segments: SegmentSelection
    mode: str = "events"
    starting_offsets: dict[str, int] = field(default_factory=dict)  # default: EARLIEST
    ending_offsets: dict[str, int] = field(default_factory=dict)  # default: LATEST
    fail_on_data_loss: bool = True

    @staticmethod
    def parse(options: Mapping[str, str]) -> ScanOptions:
        given = {str(k).lower(): str(v) for k, v in options.items()}
        backend = {
            k[len(_TIER2_PREFIX) :]: v for k, v in given.items() if k.startswith(_TIER2_PREFIX)
        }
        if unknown := sorted(
            k for k in given if k not in _KNOWN and not k.startswith(_TIER2_PREFIX)
        ):
            raise ScanOptionsError(f"unknown options {unknown}; known: {sorted(_KNOWN)}, tier2.*")
        if not given.get("tier2"):
            raise ScanOptionsError("option tier2 (the Tier 2 URI) is required")
        if not given.get("segments"):
            raise ScanOptionsError("option segments (names, or a prefix ending in '*') is required")
        mode = given.get("mode", "events").lower()
        if mode not in MODES:
            raise ScanOptionsError(f"mode must be one of {MODES}, not {mode!r}")
        return ScanOptions(
            tier2_uri=given["tier2"],
            tier2_options=backend,
            segments=SegmentSelection.parse(given["segments"]),
            mode=mode,
            starting_offsets=_offsets(
                "starting_offsets", given.get("starting_offsets"), "earliest"
            ),
            ending_offsets=_offsets("ending_offsets", given.get("ending_offsets"), "latest"),
            fail_on_data_loss=_boolean("fail_on_data_loss", given.get("fail_on_data_loss", "true")),
        )


def _offsets(option: str, text: str | None, default: str) -> dict[str, int]:
    """``{}`` for the default word, else the JSON map with every value checked."""
    if text is None or text.strip().lower() == default:
        return {}
    try:
        document = json.loads(text)
    except json.JSONDecodeError as e:
        raise ScanOptionsError(f"{option} must be {default!r} or a JSON object: {e}") from e
    if not isinstance(document, dict):
        raise ScanOptionsError(f"{option} must be {default!r} or a JSON object of offsets")
    offsets = {}
    for name, value in document.items():
        if type(value) is not int or value < EARLIEST:
            raise ScanOptionsError(
                f"{option}: offset of {name!r} must be an integer >= 0, or -2 (earliest) "
                f"or -1 (latest), not {value!r}"
            )
        offsets[name] = value
    return offsets


def _boolean(option: str, text: str) -> bool:
    value = text.strip().lower()
    if value not in ("true", "false"):
        raise ScanOptionsError(f"{option} must be true or false, not {text!r}")
    return value == "true"
