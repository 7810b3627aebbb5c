"""Step: consecutive readings of a signal further apart than the quantity can physically move.

Some quantities change slowly: ambient air warms by a few degrees over hours. Two consecutive
readings (event-time order) may differ by measurement noise (`max_step`) plus at most
`max_rate_per_s` per second of the gap between them; a larger change is a step: a sudden
fault such as a spike. Both edges of an excursion are steps (into it and back out), so an
excursion that was already under way at an entity's first reading still shows at its end; no
baseline or warm-up is needed, only the previous reading. Readings with a missing value are
skipped and never replace the previous reading.
Fires per step. Key: the signal and both event ids of the pair.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import pandas as pd
from pydantic import Field

from detectors.alert import Alert, Evidence
from detectors.frames import EVENT_ID, EVENT_TIME, Columns, per_entity
from detectors.params import Thresholds
from detectors.series.base import SeriesState, series_rows

RULE = "step"


class StepParams(Thresholds):
    """Thresholds of `step`."""

    max_step: float = Field(
        3.0, gt=0, description="Change allowed between two readings at once (noise), units."
    )
    max_rate_per_s: float = Field(
        0.01, ge=0, description="Further change allowed per second of the gap between them."
    )


def step_fires(delta: Any, gap_ms: Any, params: StepParams) -> Any:
    """The rule, on floats or numpy arrays alike (`delta`: value minus the previous one)."""
    return abs(delta) > params.max_step + params.max_rate_per_s * gap_ms / 1000.0


def step_evidence(
    signal: str, previous: float, value: float, gap_ms: float, params: StepParams
) -> Evidence:
    return {
        "signal": signal,
        "previous": float(previous),
        "value": float(value),
        "delta": float(value - previous),
        "gap_s": float(gap_ms) / 1000.0,
        **params.model_dump(),
    }


def _alert(
    entity_id: str,
    signal: str,
    ids: tuple[str, str],
    time: int,
    evidence: Evidence,
    label: str | None,
) -> Alert:
    return Alert.make(RULE, entity_id, time, ids, evidence, (signal, *ids), label)


def step_alerts(
    df: pd.DataFrame,
    signal: str,
    params: StepParams | None = None,
    *,
    label: str | None = None,
    columns: Columns = None,
) -> pd.DataFrame:
    """Vectorised form over readings with a `signal` column.

    >>> rows = pd.DataFrame({"entity_id": "s1", "event_id": ["a", "b", "c", "d"],
    ...     "event_time": [0, 5_000, 10_000, 15_000], "temp_c": [21.0, 21.2, 46.1, 21.3]})
    >>> step_alerts(rows, "temp_c")["event_ids"].tolist()
    [['b', 'c'], ['c', 'd']]
    """
    p = params or StepParams()

    def rule_for(entity_id: str, readings: pd.DataFrame) -> list[Alert]:
        values = readings[signal].to_numpy(float)
        times = readings[EVENT_TIME].to_numpy(np.int64)
        ids = readings[EVENT_ID].to_numpy(str)
        delta, gap = np.diff(values), np.diff(times)
        alerts = []
        for i in np.flatnonzero(step_fires(delta, gap, p)) + 1:
            evidence = step_evidence(signal, values[i - 1], values[i], gap[i - 1], p)
            pair = (str(ids[i - 1]), str(ids[i]))
            alerts.append(_alert(entity_id, signal, pair, int(times[i]), evidence, label))
        return alerts

    return per_entity(series_rows(df, signal, (), columns), rule_for)


class StepState(SeriesState):
    """Stateful form: the previous reading per entity and signal (`detectors.series.base`).

    >>> state = StepState("s1", "temp_c")
    >>> [len(state.update(f"e{i}", i * 5_000, v)) for i, v in enumerate([21.0, 21.2, 46.1, 21.3])]
    [0, 0, 1, 1]
    """

    rule: ClassVar[str] = RULE

    def __init__(
        self,
        entity_id: str,
        signal: str,
        params: StepParams | None = None,
        *,
        label: str | None = None,
        max_seen: int = 256,
    ) -> None:
        super().__init__(entity_id, signal, label, max_seen)
        self.params = params or StepParams()
        self.previous: tuple[str, int, float] | None = None

    def update(self, event_id: str, event_time: int, value: float | None) -> list[Alert]:
        return self.push(event_id, event_time, [value])

    def step(self, event_id: str, event_time: int, values: Sequence[float]) -> Alert | None:
        value, alert = values[0], None
        if self.previous is not None:
            prev_id, prev_time, prev_value = self.previous
            gap = event_time - prev_time
            if step_fires(value - prev_value, gap, self.params):
                evidence = step_evidence(self.signal, prev_value, value, gap, self.params)
                ids = (prev_id, event_id)
                alert = _alert(self.entity_id, self.signal, ids, event_time, evidence, self.label)
        self.previous = (event_id, event_time, value)
        return alert

    def _snapshot(self) -> dict[str, Any]:
        return {"previous": None if self.previous is None else list(self.previous)}

    def _restore(self, data: Mapping[str, Any]) -> None:
        prev = data["previous"]
        self.previous = None if prev is None else (str(prev[0]), int(prev[1]), float(prev[2]))
