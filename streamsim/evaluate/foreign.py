"""A foreign job's alerts (`streamsim evaluate SCENARIO --alerts-topic TOPIC | --alerts-file
FILE`): read as raw records, checked against the contract (`core.contracts.foreign`), kept
when they are the run's, and turned into detections for the same scoring as our own alerts.

Nothing is dropped unseen: every record read is scored, or counted as rejected (per reason),
as another run's (no event id of the run's prefix, or detected before the run started) or as
a repeat of an `alert_id` already read (a replay counts once, as our own alerts do).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.config import StackConfig
from core.contracts.foreign import parse
from core.kafka import reader


def file_values(path: Path) -> Iterator[bytes]:
    """The lines of a JSON-lines file, blank lines left out."""
    with path.open("rb") as lines:
        for line in lines:
            if line.strip():
                yield line


def topic_values(stack: StackConfig, topic: str) -> Iterator[bytes | None]:
    """Every record value of `topic`, from its start to its end now."""
    for batch in reader.topic_values(stack, topic):
        yield from batch


@dataclass
class Alerts:
    """The records read from a source, sorted out (see the module docstring)."""

    source: str
    alerts: list[dict[str, Any]] = field(default_factory=list)
    read: int = 0
    rejected: Counter[str] = field(default_factory=Counter)
    other_runs: int = 0
    repeated: int = 0

    def summary(self) -> dict[str, Any]:
        """The report's `foreign` object: read = scored + rejected + other_runs + repeated."""
        return {
            "source": self.source,
            "read": self.read,
            "scored": len(self.alerts),
            "rejected": sum(self.rejected.values()),
            "rejected_by_reason": dict(sorted(self.rejected.items())),
            "other_runs": self.other_runs,
            "repeated_alert_ids": self.repeated,
        }


def sort_out(
    values: Iterable[bytes | str | None],
    labels: Iterable[str],
    prefix: str,
    since_wall_ms: float,
    source: str,
) -> Alerts:
    """Check each record against the contract with the scenario's `labels`; keep the alerts of
    the run whose event ids start with `prefix` and that were not detected before the run
    started (`since_wall_ms`, where `detected_at` is given); each `alert_id` once."""
    known = frozenset(labels)
    out = Alerts(source)
    seen: set[str] = set()
    for raw in values:
        out.read += 1
        alert, reason = parse(raw, known)
        if alert is None:
            out.rejected[str(reason)] += 1
            continue
        detected = alert.get("detected_at")
        ours = any(e.startswith(prefix) for e in alert["event_ids"])
        if not ours or (detected is not None and detected < since_wall_ms):
            out.other_runs += 1
            continue
        alert_id = alert.get("alert_id")
        if alert_id is not None:
            if alert_id in seen:
                out.repeated += 1
                continue
            seen.add(alert_id)
        out.alerts.append(alert)
    return out


def detection_rows(alerts: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One detection row per alert (`report._detections` maps `at` to the simulated clock)."""
    return [
        {"label": a["label"], "event_ids": a["event_ids"], "at": a.get("detected_at")}
        for a in alerts
    ]
