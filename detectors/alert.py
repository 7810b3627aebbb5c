"""The one shape every rule reports in: `Alert`, and its DataFrame twin for the vectorised forms.

The row is declared in the contracts (`core.contracts.alerts.ALERT_ROW`); its columns and
Spark DDL derive from there."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from core.contracts.alerts import ALERT_ROW

EvidenceValue = float | int | str | bool | None
Evidence = Mapping[str, EvidenceValue]

#: Columns of an alert DataFrame, in order. `evidence` is a JSON object string there.
ALERT_COLUMNS: tuple[str, ...] = ALERT_ROW.names
#: Spark schema of an alert DataFrame (for `applyInPandas` / `transformWithStateInPandas`):
#: "alert_id STRING, rule STRING, label STRING, entity_id STRING, event_time BIGINT,
#: event_ids ARRAY<STRING>, evidence STRING".
ALERT_SPARK_DDL: str = ALERT_ROW.spark_ddl()
#: An alert lists at most this many event ids: the first and the last half of them.
MAX_EVENT_IDS = 64


def alert_id_for(rule: str, entity_id: str, key: Iterable[object]) -> str:
    """A short deterministic id: the same rule, entity and key always give the same id.

    >>> alert_id_for("velocity", "card-1", ["tx-9"]) == alert_id_for("velocity", "card-1", ["tx-9"])
    True
    """
    text = "\x1f".join([rule, entity_id, *(str(part) for part in key)])
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def cap_ids(ids: Sequence[str], limit: int = MAX_EVENT_IDS) -> tuple[str, ...]:
    """At most `limit` ids: all of them, or the first and last `limit // 2`."""
    if len(ids) <= limit:
        return tuple(ids)
    half = limit // 2
    return (*ids[:half], *ids[len(ids) - half :])


def _json_safe(value: EvidenceValue) -> EvidenceValue:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


@dataclass(frozen=True, slots=True)
class Alert:
    """One decision of one rule about one entity.

    - `rule`: the rule that fired (snake_case, e.g. `impossible_travel`).
    - `label`: the label type it targets (`card_testing`, `overheating`, ...), or None.
    - `entity_id`: the card token, vehicle or merchant id.
    - `event_time`: epoch ms (device clock) of the event that fired it.
    - `event_ids`: the events involved, in event-time order.
    - `evidence`: the values that crossed the thresholds, and the thresholds.
    - `alert_id`: a hash of rule, entity and the rule's key (see each rule), so a replay or a
      restarted job reproduces the same id and a sink can upsert instead of double-count.
    """

    rule: str
    entity_id: str
    event_time: int
    event_ids: tuple[str, ...]
    evidence: Evidence = field(hash=False)
    alert_id: str
    label: str | None = None

    @classmethod
    def make(
        cls,
        rule: str,
        entity_id: str,
        event_time: int,
        event_ids: Sequence[str],
        evidence: Evidence,
        key: Iterable[object],
        label: str | None = None,
    ) -> Alert:
        """Build an alert whose id is derived from `rule`, `entity_id` and `key`."""
        return cls(
            rule=rule,
            entity_id=entity_id,
            event_time=int(event_time),
            event_ids=cap_ids(event_ids),
            evidence=dict(evidence),
            alert_id=alert_id_for(rule, entity_id, key),
            label=label,
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict (non-finite floats in the evidence become null)."""
        return {
            "alert_id": self.alert_id,
            "rule": self.rule,
            "label": self.label,
            "entity_id": self.entity_id,
            "event_time": self.event_time,
            "event_ids": list(self.event_ids),
            "evidence": {k: _json_safe(v) for k, v in self.evidence.items()},
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, allow_nan=False)

    def to_row(self) -> dict[str, Any]:
        """One row of an alert DataFrame: like `to_dict`, with `evidence` as a JSON string."""
        row = self.to_dict()
        row["evidence"] = json.dumps(row["evidence"], sort_keys=True, allow_nan=False)
        return row

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Alert:
        """Inverse of `to_dict` and `to_row` (a JSON-string evidence is parsed)."""
        evidence = data["evidence"]
        if isinstance(evidence, str):
            evidence = json.loads(evidence)
        label = data.get("label")
        return cls(
            rule=str(data["rule"]),
            entity_id=str(data["entity_id"]),
            event_time=int(data["event_time"]),
            event_ids=tuple(str(i) for i in data["event_ids"]),
            evidence=dict(evidence),
            alert_id=str(data["alert_id"]),
            label=None if label is None or label != label else str(label),
        )


def alerts_to_frame(alerts: Iterable[Alert]) -> pd.DataFrame:
    """Alerts as a DataFrame with `ALERT_COLUMNS`, sorted by (event_time, alert_id)."""
    rows = sorted((alert.to_row() for alert in alerts), key=_row_order)
    columns = {name: [row[name] for row in rows] for name in ALERT_COLUMNS}
    frame = pd.DataFrame(columns, columns=list(ALERT_COLUMNS), dtype=object)
    frame["event_time"] = frame["event_time"].astype("int64")
    return frame


def _row_order(row: dict[str, Any]) -> tuple[int, str]:
    return row["event_time"], row["alert_id"]


def frame_to_alerts(frame: pd.DataFrame) -> list[Alert]:
    """The alerts of an alert DataFrame, in row order.

    >>> alert = Alert.make("threshold", "v1", 5, ["e1"], {"value": 1.5}, key=["e1"])
    >>> frame_to_alerts(alerts_to_frame([alert])) == [alert]
    True
    """
    return [Alert.from_dict(row) for row in frame.to_dict("records")]
