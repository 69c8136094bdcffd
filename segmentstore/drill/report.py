"""The drill's report: the faults and how long each took to heal, what was acknowledged, and
whether anything was lost or torn; as a table for people and JSON for machines."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table


@dataclass
class FaultRecord:
    kind: str
    at_s: float
    recovery_s: float | None  # None: it did not recover within the limit
    note: str = ""
    measures: dict[str, Any] = field(default_factory=dict)  # a partition's, while it was held


@dataclass
class DrillReport:
    seed: int
    duration_s: float = 0.0
    faults: list[FaultRecord] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # fault kind -> why not injected
    acknowledged: int = 0
    acknowledged_bytes: int = 0
    verified: int = 0
    lost: int = 0
    lost_reasons: dict[str, int] = field(default_factory=dict)  # why -> how many of the lost
    torn: int = 0  # bytes that were not whole records
    duplicated: int = 0
    duplicates_answered: int = 0
    exactly_once_failures: int = 0
    # acknowledged by a node after another had taken the container over (a cluster's)
    stale_acknowledged: int = 0
    retries: int = 0
    answers: dict[str, int] = field(default_factory=dict)
    read_bytes: int = 0
    problems: list[str] = field(default_factory=list)
    max_recovery_s: float = 0.0
    # the nodes' resources through the run (segmentstore.drill.resources), and the series
    # among them that kept growing
    resources: dict[str, Any] = field(default_factory=dict)
    growing: list[str] = field(default_factory=list)
    # where a failed drill left its deployment's logs and data (None: it passed, or it ran
    # against a deployment it did not spawn)
    kept: str | None = None

    def recovery(self) -> dict[str, float | None]:
        times = sorted(f.recovery_s for f in self.faults if f.recovery_s is not None)
        return {
            "p50": _percentile(times, 0.50),
            "p99": _percentile(times, 0.99),
            "max": times[-1] if times else None,
        }

    @property
    def too_slow(self) -> list[FaultRecord]:
        return [
            f for f in self.faults if f.recovery_s is None or f.recovery_s > self.max_recovery_s
        ]

    @property
    def passed(self) -> bool:
        return (
            self.lost == self.torn == self.duplicated == self.exactly_once_failures == 0
            and self.stale_acknowledged == 0
            and not self.too_slow
            and not self.problems
            and not self.growing
        )

    def recovery_by_kind(self) -> dict[str, dict[str, Any]]:
        """Per fault kind: how many, recovery p50 and p99, and the first and the last one
        (``[at_s, recovery_s]``), to compare the end of a long run with its start."""
        kinds: dict[str, dict[str, Any]] = {}
        for kind in sorted({f.kind for f in self.faults}):
            faults = [f for f in self.faults if f.kind == kind]
            times = sorted(f.recovery_s for f in faults if f.recovery_s is not None)
            kinds[kind] = {
                "count": len(faults),
                "p50": _percentile(times, 0.50),
                "p99": _percentile(times, 0.99),
                "first": [faults[0].at_s, faults[0].recovery_s],
                "last": [faults[-1].at_s, faults[-1].recovery_s],
            }
        return kinds

    def to_json(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["recovery_s"] = self.recovery()
        doc["recovery_by_kind"] = self.recovery_by_kind()
        doc["passed"] = self.passed
        return doc

    def write_json(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_json(), indent=2) + "\n")

    def print_table(self, console: Console) -> None:
        faults = Table(title="Faults")
        for column in ("#", "kind", "at (s)", "recovery (s)", "note"):
            faults.add_column(column)
        for i, fault in enumerate(self.faults, 1):
            took = "did not recover" if fault.recovery_s is None else f"{fault.recovery_s:.2f}"
            faults.add_row(str(i), fault.kind, f"{fault.at_s:.1f}", took, fault.note)
        console.print(faults)
        by_kind = Table(title="Recovery by kind")
        for column in ("kind", "count", "p50 (s)", "p99 (s)", "first: at / took (s)", "last"):
            by_kind.add_column(column)
        for kind, row in self.recovery_by_kind().items():
            by_kind.add_row(
                kind,
                str(row["count"]),
                _seconds(row["p50"]),
                _seconds(row["p99"]),
                f"{row['first'][0]:.0f} / {_seconds(row['first'][1])}",
                f"{row['last'][0]:.0f} / {_seconds(row['last'][1])}",
            )
        console.print(by_kind)
        self._print_resources(console)
        summary = Table(title="Drill", show_header=False)
        recovery = self.recovery()
        for label, value in (
            ("seed", self.seed),
            ("duration (s)", f"{self.duration_s:.1f}"),
            ("faults", len(self.faults)),
            ("acknowledged appends", self.acknowledged),
            ("acknowledged bytes", self.acknowledged_bytes),
            ("verified in place", self.verified),
            ("lost", _with_reasons(self.lost, self.lost_reasons)),
            ("torn bytes", self.torn),
            ("duplicated", self.duplicated),
            ("retries answered duplicate", self.duplicates_answered),
            ("exactly-once failures", self.exactly_once_failures),
            ("acknowledged by a fenced-out owner", self.stale_acknowledged),
            ("recovery p50 / p99 / max (s)", " / ".join(_seconds(recovery[k]) for k in recovery)),
            ("answers", ", ".join(f"{k}: {v}" for k, v in sorted(self.answers.items()))),
            ("result", "PASSED" if self.passed else "FAILED"),
        ):
            summary.add_row(label, str(value))
        for kind, why in sorted(self.skipped.items()):
            summary.add_row(f"not injected: {kind}", why)
        for problem in self.problems[:20]:
            summary.add_row("problem", problem)
        if self.kept is not None:
            summary.add_row("logs and data kept in", self.kept)
        for series in self.growing:
            summary.add_row("keeps growing", series)
        console.print(summary)

    def _print_resources(self, console: Console) -> None:
        """The first and last sample of every figure the run watched (a node restarted by a
        fault shows the series of its last process)."""
        samples = self.resources.get("samples") or []
        if not samples:
            return
        table = Table(title=f"Resources ({len(samples)} samples)")
        for column in ("series", "first", "last", "samples", "keeps growing"):
            table.add_column(column)
        latest: dict[str, dict[str, Any]] = {}
        for trend in self.resources.get("trends", []):
            owner = trend["series"].split(" (")[0].rsplit(" ", 1)[0]
            figure = trend["series"].rsplit(" ", 1)[1]
            latest[f"{owner} {figure}"] = trend  # later processes come later
        for name, trend in sorted(latest.items()):
            scale = (1 << 20) if name.endswith("rss_bytes") else 1
            unit = " MiB" if scale > 1 else ""
            table.add_row(
                name.replace("rss_bytes", "rss"),
                f"{trend['first'] / scale:.0f}{unit}",
                f"{trend['last'] / scale:.0f}{unit}",
                str(trend["samples"]),
                "YES" if trend["growing"] else "no",
            )
        console.print(table)


def _percentile(sorted_values: list[float], q: float) -> float | None:
    if not sorted_values:
        return None
    rank = max(0, math.ceil(q * len(sorted_values)) - 1)
    return sorted_values[rank]


def _with_reasons(count: int, reasons: dict[str, int]) -> str:
    if not reasons:
        return str(count)
    return f"{count} ({', '.join(f'{why}: {n}' for why, n in sorted(reasons.items()))})"


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"
