"""Harsh braking: longitudinal deceleration beyond `decel_ms2`, counted in a window.

A braking event is a run of consecutive readings with `accel_long_ms2 < -decel_ms2` (a gap
over `max_gap_s` splits it). At each event's first reading, count the events whose first
reading falls in the window `(t - window_s, t]`; fire when there are at least `min_events`
(with the default 1, every harsh braking event fires once). Key: the signal and the event's
first event id.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import pandas as pd
from pydantic import Field

from detectors.alert import Alert, Evidence
from detectors.frames import EVENT_ID, EVENT_TIME, Columns, per_entity
from detectors.params import Thresholds
from detectors.runs import run_starts
from detectors.series.base import SeriesState, series_rows
from detectors.windows import window_bounds

RULE = "harsh_braking"
SIGNAL = "accel_long_ms2"


class BrakingParams(Thresholds):
    """Thresholds of `harsh_braking`."""

    decel_ms2: float = Field(
        3.5, gt=0, le=100, description="Harsh: acceleration strictly below minus this, m/s²."
    )
    min_events: int = Field(1, ge=1, le=100_000, description="Events in the window to fire.")
    window_s: float = Field(600.0, gt=0, le=7 * 86_400, description="Window length, seconds.")
    max_gap_s: float | None = Field(
        5.0, gt=0, description="A longer gap between readings splits an event (None: never)."
    )

    @property
    def window_ms(self) -> int:
        return max(1, round(self.window_s * 1000))


def harsh(accel: Any, params: BrakingParams) -> Any:
    """True where a reading brakes harshly, on floats or numpy arrays alike."""
    return accel < -params.decel_ms2


def braking_fires(events: Any, params: BrakingParams) -> Any:
    return events >= params.min_events


def braking_evidence(signal: str, accel: float, events: int, params: BrakingParams) -> Evidence:
    return {"signal": signal, "value": float(accel), "events": int(events), **params.model_dump()}


def _gap_ms(params: BrakingParams) -> float | None:
    return None if params.max_gap_s is None else params.max_gap_s * 1000


def braking_alerts(
    df: pd.DataFrame,
    params: BrakingParams | None = None,
    *,
    signal: str = SIGNAL,
    label: str | None = RULE,
    columns: Columns = None,
) -> pd.DataFrame:
    """Vectorised form over readings with an `accel_long_ms2` column.

    >>> rows = pd.DataFrame({"entity_id": "v1", "event_id": list("abcde"),
    ...     "event_time": [0, 100, 200, 300, 400], "accel_long_ms2": [0, -5, -6, 0, -4]})
    >>> braking_alerts(rows)["event_ids"].tolist()
    [['b'], ['b', 'e']]
    """
    p = params or BrakingParams()

    def rule_for(entity_id: str, readings: pd.DataFrame) -> list[Alert]:
        times = readings[EVENT_TIME].to_numpy(np.int64)
        accel = readings[signal].to_numpy(float)
        first = np.flatnonzero(run_starts(harsh(accel, p), times, _gap_ms(p)))
        left, right = window_bounds(times[first], p.window_ms)
        counts = right - left
        ids = readings[EVENT_ID].tolist()
        alerts = []
        for k in np.flatnonzero(braking_fires(counts, p)):
            i = first[k]
            evidence = braking_evidence(signal, accel[i], counts[k], p)
            window_ids = [ids[j] for j in first[left[k] : k + 1]]
            key = (signal, ids[i])
            alerts.append(Alert.make(RULE, entity_id, times[i], window_ids, evidence, key, label))
        return alerts

    return per_entity(series_rows(df, signal, (), columns), rule_for)


class BrakingState(SeriesState):
    """Stateful form for one vehicle (see `detectors.series.base`).

    >>> state = BrakingState("v1")
    >>> [len(state.update(e, t, a)) for e, t, a in [("a", 0, 0), ("b", 100, -5), ("c", 200, -6)]]
    [0, 1, 0]
    """

    rule: ClassVar[str] = RULE

    def __init__(
        self,
        entity_id: str,
        params: BrakingParams | None = None,
        *,
        signal: str = SIGNAL,
        label: str | None = RULE,
        max_seen: int = 256,
    ) -> None:
        super().__init__(entity_id, signal, label, max_seen)
        self.params = params or BrakingParams()
        self.braking = False
        self.previous: int | None = None
        self.events: deque[tuple[int, str]] = deque()

    def update(self, event_id: str, event_time: int, accel: float | None) -> list[Alert]:
        return self.push(event_id, event_time, [accel])

    def step(self, event_id: str, event_time: int, values: Sequence[float]) -> Alert | None:
        gap_ms = _gap_ms(self.params)
        gap = self.previous is not None and gap_ms is not None
        gap = gap and event_time - (self.previous or 0) > (gap_ms or 0)
        was, self.braking = self.braking, bool(harsh(values[0], self.params))
        self.previous = event_time
        if not self.braking or (was and not gap):
            return None
        self.events.append((event_time, event_id))
        while self.events[0][0] <= event_time - self.params.window_ms:
            self.events.popleft()
        if not braking_fires(len(self.events), self.params):
            return None
        evidence = braking_evidence(self.signal, values[0], len(self.events), self.params)
        ids = [e for _, e in self.events]
        key = (self.signal, event_id)
        return Alert.make(self.rule, self.entity_id, event_time, ids, evidence, key, self.label)

    def _snapshot(self) -> dict[str, Any]:
        events = [list(e) for e in self.events]
        return {"braking": self.braking, "previous": self.previous, "events": events}

    def _restore(self, data: Mapping[str, Any]) -> None:
        self.braking = bool(data["braking"])
        self.previous = None if data["previous"] is None else int(data["previous"])
        self.events = deque((int(t), str(e)) for t, e in data["events"])
