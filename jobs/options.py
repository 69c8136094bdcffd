"""The options of the ``segmentstore`` data source, parsed and checked once, on the driver.

Spark hands a Python data source its options when the DataFrame is created
(``spark.read...load()``, ``spark.readStream...load()``), before it knows whether a batch or a
stream will read them; :meth:`SourceOptions.parse` checks every name and value then, so a
mistake fails ``load()`` naming the option, the value and what is allowed. The names of
Spark's Kafka source are accepted as aliases (:data:`OPTIONS`); option names are
case-insensitive, as everywhere in Spark.

In events mode a starting or ending offset must be an event boundary: the planner proves it
(:mod:`segmentstore.jobs.boundaries`) and refuses one inside an event.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from segmentstore.jobs.errors import ScanOptionsError

EARLIEST = -2
LATEST = -1
MODES = ("events", "bytes")
TIER2_PREFIX = "tier2."


class Option(NamedTuple):
    name: str
    kafka: str | None  # the Kafka source's name for it, accepted as an alias
    reads: str  # "batch and stream", "batch" or "stream"
    allowed: str  # what an error message lists as allowed


OPTIONS = (
    Option("tier2", None, "batch and stream", "a Tier 2 URI: file:///path, s3://bucket/prefix"),
    Option("segments", None, "batch and stream", "names and prefixes ending in '*', by commas"),
    Option("mode", None, "batch and stream", "events, bytes"),
    Option(
        "starting_offsets",
        "startingOffsets",
        "batch and stream",
        'earliest, latest, or a JSON object {"segment": offset}',
    ),
    Option(
        "ending_offsets", "endingOffsets", "batch", 'latest, or a JSON object {"segment": offset}'
    ),
    Option(
        "starting_timestamp",
        "startingTimestamp",
        "batch and stream",
        "milliseconds since the epoch",
    ),
    Option(
        "starting_offsets_by_timestamp",
        "startingOffsetsByTimestamp",
        "batch and stream",
        'a JSON object {"segment": milliseconds since the epoch}',
    ),
    Option("ending_timestamp", "endingTimestamp", "batch", "milliseconds since the epoch"),
    Option(
        "ending_offsets_by_timestamp",
        "endingOffsetsByTimestamp",
        "batch",
        'a JSON object {"segment": milliseconds since the epoch}',
    ),
    Option("fail_on_data_loss", "failOnDataLoss", "batch and stream", "true, false"),
    Option("verify_checksums", None, "batch and stream", "true (the default), false"),
    Option("min_partitions", "minPartitions", "batch and stream", "an integer >= 1"),
    Option("max_bytes_per_trigger", "maxBytesPerTrigger", "stream", "an integer >= 1"),
)
_BY_NAME = {option.name: option for option in OPTIONS}
_ALIASES = {option.kafka.lower(): option.name for option in OPTIONS if option.kafka}
_STARTS = ("starting_offsets", "starting_timestamp", "starting_offsets_by_timestamp")
_ENDS = ("ending_offsets", "ending_timestamp", "ending_offsets_by_timestamp")
POSITION_OPTIONS = frozenset(_STARTS + _ENDS)


def canonical_name(key: str) -> str:
    """The project's name of option ``key`` (any case, or the Kafka source's name)."""
    lowered = key.lower()
    return _ALIASES.get(lowered, lowered)


def _fail(name: str, value: object, problem: str) -> ScanOptionsError:
    option = _BY_NAME[name]
    shown = f"{option.name} ({option.kafka})" if option.kafka else option.name
    return ScanOptionsError(f"option {shown}: {value!r} {problem}; allowed: {option.allowed}")


@dataclass(frozen=True)
class SegmentSelection:
    """Exact names and name prefixes; a segment is selected if it matches either."""

    names: tuple[str, ...]
    prefixes: tuple[str, ...]

    @staticmethod
    def parse(text: str) -> SegmentSelection:
        items = [item.strip() for item in text.split(",") if item.strip()]
        if not items:
            raise _fail("segments", text, "names no segment")
        names = tuple(dict.fromkeys(i for i in items if not i.endswith("*")))
        prefixes = tuple(dict.fromkeys(i[:-1] for i in items if i.endswith("*")))
        for item in (*names, *prefixes):
            if "*" in item:
                raise _fail("segments", text, f"has {item!r}: '*' may only end a prefix")
        return SegmentSelection(names, prefixes)

    def matches(self, name: str) -> bool:
        return name in self.names or name.startswith(self.prefixes)

    def describe(self) -> str:
        return ",".join([*self.names, *(f"{p}*" for p in self.prefixes)])


@dataclass(frozen=True)
class Bound:
    """Where a read starts (or ends) in each segment. A segment named in ``offsets`` or
    ``timestamps`` is placed there; any other at ``timestamp`` if set, else at ``default``
    (:data:`EARLIEST` or :data:`LATEST`). A timestamp means the offset that ``:offsetAt``
    gives for it (:mod:`segmentstore.jobs.time_offsets`)."""

    default: int
    offsets: Mapping[str, int] = field(default_factory=dict)
    timestamps: Mapping[str, int] = field(default_factory=dict)
    timestamp: int | None = None
    # the incarnations the offsets were taken from ({"name": {"segment_id": I, "offset": N}}):
    # a segment that is another one by now is data loss, not read from a stale offset
    segment_ids: Mapping[str, int] = field(default_factory=dict)

    def named(self) -> set[str]:
        return {*self.offsets, *self.timestamps}


@dataclass(frozen=True)
class ScanOptions:
    """What a batch scan (or one micro-batch of a stream) reads."""

    tier2_uri: str
    tier2_options: dict[str, str] = field(repr=False)  # may hold credentials
    segments: SegmentSelection
    mode: str = "events"
    starting: Bound = field(default_factory=lambda: Bound(EARLIEST))
    ending: Bound = field(default_factory=lambda: Bound(LATEST))
    fail_on_data_loss: bool = True
    min_partitions: int = 1
    verify_checksums: bool = True

    @staticmethod
    def parse(options: Mapping[str, str]) -> ScanOptions:
        """A batch scan's options (those of a stream alone are ignored)."""
        return SourceOptions.parse(options).scan


@dataclass(frozen=True)
class SourceOptions:
    """Every option as given, checked: ``scan`` and the streaming ones. ``stream_problem``
    says why a stream cannot take them (batch-only options), found out only when Spark
    builds the stream reader."""

    scan: ScanOptions
    max_bytes_per_trigger: int | None
    batch_only: tuple[str, ...]

    @staticmethod
    def parse(options: Mapping[str, Any]) -> SourceOptions:
        given = _canonical(options)
        backend = {
            k[len(TIER2_PREFIX) :]: v for k, v in given.items() if k.startswith(TIER2_PREFIX)
        }
        if not given.get("tier2"):
            raise _fail("tier2", given.get("tier2"), "is required")
        if not given.get("segments"):
            raise _fail("segments", given.get("segments"), "is required")
        mode = given.get("mode", "events").lower()
        if mode not in MODES:
            raise _fail("mode", given["mode"], "is not a mode")
        scan = ScanOptions(
            tier2_uri=given["tier2"],
            tier2_options=backend,
            segments=SegmentSelection.parse(given["segments"]),
            mode=mode,
            starting=_bound(given, _STARTS, EARLIEST),
            ending=_bound(given, _ENDS, LATEST),
            fail_on_data_loss=_boolean(given, "fail_on_data_loss", True),
            min_partitions=_positive(given, "min_partitions") or 1,
            verify_checksums=_boolean(given, "verify_checksums", True),
        )
        batch_only = tuple(name for name in _ENDS if name in given)
        if mode != "events":
            batch_only += ("mode",)
        return SourceOptions(scan, _positive(given, "max_bytes_per_trigger"), batch_only)

    def stream_problem(self) -> ScanOptionsError | None:
        if not self.batch_only:
            return None
        return ScanOptionsError(
            f"a stream reads events as they are flushed, with no end: options "
            f"{', '.join(self.batch_only)} apply to batch reads only (spark.read)"
        )


def _canonical(options: Mapping[str, Any]) -> dict[str, str]:
    """The options under the project's names; Kafka's names map onto them."""
    given: dict[str, str] = {}
    for key, value in options.items():
        name = canonical_name(str(key))
        if name not in _BY_NAME and not name.startswith(TIER2_PREFIX):
            known = ", ".join(o.name for o in OPTIONS)
            raise ScanOptionsError(
                f"unknown option {key!r}; known: {known}, tier2.<backend option>, and the "
                "Kafka source's names of them (startingOffsets, failOnDataLoss, ...)"
            )
        if name in given and given[name] != str(value):
            raise _fail(
                name, str(value), f"contradicts {given[name]!r}, given under its other name"
            )
        given[name] = str(value)
    return given


def _bound(given: dict[str, str], names: tuple[str, ...], default: int) -> Bound:
    offsets_name, timestamp_name, by_timestamp_name = names
    present = [name for name in names if name in given]
    if len(present) > 1:
        raise _fail(present[1], given[present[1]], f"cannot be given with {present[0]}")
    if timestamp_name in given:
        return Bound(default, timestamp=_timestamp(timestamp_name, given[timestamp_name]))
    if by_timestamp_name in given:
        text = given[by_timestamp_name]
        stamps = {
            name: _timestamp(by_timestamp_name, value, text)
            for name, value in _json_object(by_timestamp_name, text).items()
        }
        return Bound(default, timestamps=stamps)
    if offsets_name not in given:
        return Bound(default)
    text = given[offsets_name]
    word = text.strip().lower()
    words = {"earliest": EARLIEST, "latest": LATEST} if default == EARLIEST else {"latest": LATEST}
    if word in words:
        return Bound(words[word])
    offsets, segment_ids = {}, {}
    for name, value in _json_object(offsets_name, text, incarnations=True).items():
        if isinstance(value, dict):
            segment_ids[name], value = value["segment_id"], value["offset"]
            if type(segment_ids[name]) is not int or segment_ids[name] < 0:
                raise _fail(offsets_name, text, f"gives {name!r} a segment id that is no id")
        if type(value) is not int or value < EARLIEST:
            raise _fail(
                offsets_name, text, f"gives {name!r} the offset {value!r}, not an integer >= -2"
            )
        offsets[name] = value
    return Bound(default, offsets=offsets, segment_ids=segment_ids)


_INCARNATION = {"segment_id", "offset"}


def _json_object(option: str, text: str, incarnations: bool = False) -> dict[str, Any]:
    try:
        document = json.loads(text)
    except json.JSONDecodeError:
        raise _fail(option, text, "is not allowed") from None
    if not isinstance(document, dict) or not document:
        raise _fail(option, text, "is not a JSON object naming segments")
    for name, value in document.items():
        if incarnations and isinstance(value, dict) and value.keys() == _INCARNATION:
            continue  # an offset of one incarnation, as stream offsets name them
        if isinstance(value, dict):  # Kafka's {"topic": {"partition": n}}
            raise _fail(option, text, f"nests an object under {name!r}: name segments directly")
    return document


def _timestamp(option: str, value: object, text: str | None = None) -> int:
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            raise _fail(option, text or value, "is not a timestamp") from None
    if type(value) is not int or value < 0:
        raise _fail(option, text or value, "is not a timestamp >= 0")
    return value


def _boolean(given: dict[str, str], option: str, default: bool) -> bool:
    text = given.get(option)
    if text is None:
        return default
    value = text.strip().lower()
    if value not in ("true", "false"):
        raise _fail(option, text, "is not a boolean")
    return value == "true"


def _positive(given: dict[str, str], option: str) -> int | None:
    text = given.get(option)
    if text is None:
        return None
    try:
        value = int(text.strip())
    except ValueError:
        value = 0
    if value < 1:
        raise _fail(option, text, "is not a positive integer")
    return value
