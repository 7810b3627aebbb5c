"""Threshold: a signal above (or below) a limit for long enough.

Fires once per run of consecutive readings beyond the limit, at the first reading where the
run has lasted `min_count` readings and `min_duration_s` seconds (see `detectors.runs`); a gap
of more than `max_gap_s` between readings ends a run. Typical uses: coolant above 110 °C for
30 s (`overheating`), battery below 11.5 V for 60 s (`battery_failure`).
Key: the signal and the run's first event id.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import pandas as pd
from pydantic import Field, model_validator

from detectors.alert import Alert, Evidence
from detectors.frames import EVENT_ID, EVENT_TIME, Columns, per_entity
from detectors.params import Thresholds
from detectors.runs import RunTracker, run_fires
from detectors.series.base import SeriesState, series_rows

RULE = "threshold"


class ThresholdParams(Thresholds):
    """Thresholds of `threshold`. Set `above`, `below` or both."""

    above: float | None = Field(None, description="Fire on values strictly above this.")
    below: float | None = Field(None, description="Fire on values strictly below this.")
    min_count: int = Field(1, ge=1, le=1_000_000, description="Consecutive readings needed.")
    min_duration_s: float = Field(
        0.0, ge=0, le=30 * 86_400, description="Seconds from the run's first reading needed."
    )
    max_gap_s: float | None = Field(
        60.0, gt=0, description="A longer gap between readings ends a run (None: never)."
    )

    @model_validator(mode="after")
    def _has_limit(self) -> ThresholdParams:
        if self.above is None and self.below is None:
            raise ValueError("set at least one of above, below")
        return self


def beyond(values: Any, params: ThresholdParams) -> Any:
    """True where a value is beyond the limits, on floats, numpy arrays or Spark Columns alike
    (the engine form, `pipeline.rules.threshold`, calls it too)."""
    out: Any = False
    if params.above is not None:
        out = out | (values > params.above)
    if params.below is not None:
        out = out | (values < params.below)
    return out


def run_evidence(
    signal: str, value: float, readings: int, duration_s: float, params: Thresholds
) -> Evidence:
    return {
        "signal": signal,
        "value": float(value),
        "readings": int(readings),
        "duration_s": float(duration_s),
        **params.model_dump(),
    }


def run_alerts(
    rule: str,
    entity_id: str,
    signal: str,
    label: str | None,
    readings: pd.DataFrame,
    fires: np.ndarray,
    start: np.ndarray,
    params: Thresholds,
    extra: Mapping[str, np.ndarray] | None = None,
) -> list[Alert]:
    """One alert per firing reading of `detectors.runs.run_fires`.

    `extra` adds per-reading evidence: the i-th value of each array (NaN becomes None).
    """
    ids = readings[EVENT_ID].tolist()
    times = readings[EVENT_TIME].to_numpy(np.int64)
    values = readings[signal].to_numpy(float)
    alerts = []
    for i in map(int, np.flatnonzero(fires)):
        s = int(start[i])
        evidence = run_evidence(signal, values[i], i - s + 1, (times[i] - times[s]) / 1000, params)
        for name, column in (extra or {}).items():
            value = float(column[i])
            evidence = {**evidence, name: None if value != value else value}
        key = (signal, ids[s])
        alerts.append(Alert.make(rule, entity_id, times[i], ids[s : i + 1], evidence, key, label))
    return alerts


def _gap_ms(params: ThresholdParams) -> float | None:
    return None if params.max_gap_s is None else params.max_gap_s * 1000


def threshold_alerts(
    df: pd.DataFrame,
    signal: str,
    params: ThresholdParams,
    *,
    label: str | None = None,
    columns: Columns = None,
) -> pd.DataFrame:
    """Vectorised form over readings with a `signal` column.

    >>> rows = pd.DataFrame({"entity_id": "v1", "event_id": list("abcd"),
    ...     "event_time": [0, 1_000, 2_000, 3_000], "coolant_c": [100, 112, 113, 114]})
    >>> p = ThresholdParams(above=110, min_count=2)
    >>> threshold_alerts(rows, "coolant_c", p, label="overheating")["event_ids"].tolist()
    [['b', 'c']]
    """

    def rule_for(entity_id: str, readings: pd.DataFrame) -> list[Alert]:
        fires, start = run_fires(
            beyond(readings[signal].to_numpy(float), params),
            readings[EVENT_TIME].to_numpy(np.int64),
            params.min_count,
            params.min_duration_s * 1000,
            _gap_ms(params),
        )
        return run_alerts(RULE, entity_id, signal, label, readings, fires, start, params)

    return per_entity(series_rows(df, signal, (), columns), rule_for)


class ThresholdState(SeriesState):
    """Stateful form for one vehicle and signal (see `detectors.series.base`).

    >>> state = ThresholdState("v1", "coolant_c", ThresholdParams(above=110, min_count=2))
    >>> [len(state.update(e, t, v)) for e, t, v in [("a", 0, 112), ("b", 1_000, 113)]]
    [0, 1]
    """

    rule: ClassVar[str] = RULE

    def __init__(
        self,
        entity_id: str,
        signal: str,
        params: ThresholdParams,
        *,
        label: str | None = None,
        max_seen: int = 256,
    ) -> None:
        super().__init__(entity_id, signal, label, max_seen)
        self.params = params
        self.run = RunTracker(params.min_count, params.min_duration_s * 1000, _gap_ms(params))

    def update(self, event_id: str, event_time: int, value: float | None) -> list[Alert]:
        return self.push(event_id, event_time, [value])

    def step(self, event_id: str, event_time: int, values: Sequence[float]) -> Alert | None:
        value = values[0]
        if not self.run.step(bool(beyond(value, self.params)), event_time, event_id):
            return None
        ids = self.run.ids()
        evidence = run_evidence(
            self.signal, value, self.run.count, self.run.duration_s(), self.params
        )
        key = (self.signal, ids[0])
        return Alert.make(self.rule, self.entity_id, event_time, ids, evidence, key, self.label)

    def _snapshot(self) -> dict[str, Any]:
        return self.run.snapshot()

    def _restore(self, data: Mapping[str, Any]) -> None:
        self.run.restore(data)
