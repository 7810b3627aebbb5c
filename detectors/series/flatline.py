"""Flatline (stuck sensor): a signal that stops changing while the vehicle drives.

A run is a stretch of consecutive readings whose values all stay within `epsilon` of the
run's first value (its anchor). It starts at a moving reading (`speed_kmh >= min_speed_kmh`;
a missing speed is not moving; with `speed_col=None` every reading counts as moving). A stop
pauses it: a stationary reading whose value stays put continues the run, but the run fires
only on a moving reading (a vehicle in town stops every few hundred metres; a sensor stuck
across the stop is no less stuck). A value further than `epsilon` from the anchor ends the run
(a moving one starts a new run anchored on itself), and so does a gap longer than
`max_gap_s`. Fires once per run, at the first moving reading once it has lasted
`min_duration_s` and counts `min_readings` readings (a quantised, noisy signal repeats by
chance now and then: two readings alike mean little, several do). Anchoring (rather than
comparing each value with the previous one) keeps a slow, steady drift, such as a tyre losing
pressure, from looking stuck.
Key: the signal and the run's first event id.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from pydantic import Field

from detectors.alert import Alert
from detectors.frames import EVENT_TIME, Columns, per_entity
from detectors.params import Thresholds
from detectors.runs import RunTracker
from detectors.series.base import SeriesState, series_rows
from detectors.series.threshold import run_alerts, run_evidence

RULE = "flatline"
LABEL = "stuck_sensor"
SPEED = "speed_kmh"


class FlatlineParams(Thresholds):
    """Thresholds of `flatline`."""

    epsilon: float = Field(
        1e-6, ge=0, description="Values within this of the run's first value count as unchanged."
    )
    min_duration_s: float = Field(
        300.0, gt=0, le=30 * 86_400, description="Seconds unchanged (while moving) to fire."
    )
    min_speed_kmh: float = Field(
        5.0,
        ge=0,
        le=1_000,
        description="The vehicle counts as moving at this speed or more (runs start and fire "
        "only on moving readings; a stop pauses them).",
    )
    max_gap_s: float | None = Field(
        60.0, gt=0, description="A longer gap between readings ends a run (None: never)."
    )
    min_readings: int = Field(
        1, ge=1, le=1_000_000, description="Readings in the run (the first included) to fire."
    )


def moving(speed: Any, params: FlatlineParams) -> Any:
    """True where the vehicle moves (a NaN speed does not), on floats or arrays alike."""
    return speed >= params.min_speed_kmh


def flatline_runs(
    values: NDArray[np.float64],
    times: NDArray[np.int64],
    is_moving: NDArray[np.bool_],
    params: FlatlineParams,
) -> tuple[NDArray[np.bool_], NDArray[np.int64]]:
    """`(fires, start)` as `detectors.runs.run_fires` gives them, for the runs above.

    Two readings within `epsilon` of one anchor are within `2 * epsilon` of each other, so a
    larger step (or a gap) always ends a run. Those cheap breaks cut the series into segments;
    only segments long enough to fire are scanned run by run (a numpy search per run).

    >>> fires, start = flatline_runs(np.array([5.0, 5, 5, 5, 6]), np.arange(5) * 60_000,
    ...     np.array([True, False, False, True, True]), FlatlineParams(min_duration_s=120))
    >>> fires.astype(int).tolist(), start.tolist()
    ([0, 0, 0, 1, 0], [-1, -1, -1, 0, -1])
    """
    n = len(values)
    fires, start = np.zeros(n, dtype=bool), np.full(n, -1, dtype=np.int64)
    if n == 0:
        return fires, start
    min_ms = params.min_duration_s * 1000
    cut = np.abs(np.diff(values)) > 2.000001 * params.epsilon + 1e-12
    if params.max_gap_s is not None:
        cut |= np.diff(times) > params.max_gap_s * 1000
    bounds = np.concatenate([[0], np.flatnonzero(cut) + 1, [n]])
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        i = lo
        while times[hi - 1] - times[i] >= min_ms:
            moving_at = np.flatnonzero(is_moving[i:hi])
            if moving_at.size == 0:
                break
            s = i + int(moving_at[0])
            away = np.flatnonzero(np.abs(values[s + 1 : hi] - values[s]) > params.epsilon)
            e = s + 1 + int(away[0]) if away.size else hi
            counted = np.arange(e - s) + 1 >= params.min_readings
            ready = np.flatnonzero(is_moving[s:e] & (times[s:e] - times[s] >= min_ms) & counted)
            if ready.size:
                fires[s + int(ready[0])] = True
                start[s + int(ready[0])] = s
            i = e
            if i >= hi:
                break
    return fires, start


def flatline_alerts(
    df: pd.DataFrame,
    signal: str,
    params: FlatlineParams | None = None,
    *,
    speed_col: str | None = SPEED,
    label: str | None = LABEL,
    columns: Columns = None,
) -> pd.DataFrame:
    """Vectorised form over readings with `signal` and `speed_col` (None: no speed column).

    >>> rows = pd.DataFrame({"entity_id": "v1", "event_id": [f"e{i:02}" for i in range(12)],
    ...     "event_time": [i * 30_000 for i in range(12)], "tyre_kpa": 230.0, "speed_kmh": 80.0})
    >>> flatline_alerts(rows, "tyre_kpa")[["event_time", "label"]].values.tolist()
    [[300000, 'stuck_sensor']]
    """
    p = params or FlatlineParams()

    def rule_for(entity_id: str, readings: pd.DataFrame) -> list[Alert]:
        values = readings[signal].to_numpy(float)
        times = readings[EVENT_TIME].to_numpy(np.int64)
        if speed_col is None:
            is_moving = np.ones(len(values), bool)
        else:
            is_moving = moving(readings[speed_col].to_numpy(float), p)
        fires, start = flatline_runs(values, times, is_moving, p)
        return run_alerts(RULE, entity_id, signal, label, readings, fires, start, p)

    required = () if speed_col is None else (speed_col,)
    return per_entity(series_rows(df, signal, (), columns, required), rule_for)


class FlatlineState(SeriesState):
    """Stateful form for one vehicle and signal (see `detectors.series.base`).

    >>> state = FlatlineState("v1", "tyre_kpa")
    >>> fired = [len(state.update(f"e{i}", i * 30_000, 230.0, 80.0)) for i in range(12)]
    >>> fired.index(1), sum(fired)
    (10, 1)
    """

    rule: ClassVar[str] = RULE

    def __init__(
        self,
        entity_id: str,
        signal: str,
        params: FlatlineParams | None = None,
        *,
        speed_col: str | None = SPEED,
        label: str | None = LABEL,
        max_seen: int = 256,
    ) -> None:
        super().__init__(entity_id, signal, label, max_seen)
        self.params = params or FlatlineParams()
        self.speed_col = speed_col
        gap_ms = None if self.params.max_gap_s is None else self.params.max_gap_s * 1000
        self.run = RunTracker(self.params.min_readings, self.params.min_duration_s * 1000, gap_ms)
        self.anchor = 0.0

    def fields(self) -> tuple[str, ...]:
        return (self.signal,) if self.speed_col is None else (self.signal, self.speed_col)

    def update(
        self, event_id: str, event_time: int, value: float | None, speed: float | None = None
    ) -> list[Alert]:
        """One reading (`speed` is ignored when the state was made with `speed_col=None`)."""
        return self.push(event_id, event_time, [value, speed][: len(self.fields())])

    def step(self, event_id: str, event_time: int, values: Sequence[float]) -> Alert | None:
        value = values[0]
        speed = values[1] if self.speed_col is not None else self.params.min_speed_kmh
        run, p = self.run, self.params
        gap = run.last_time is not None and p.max_gap_s is not None
        gap = gap and event_time - (run.last_time or 0) > (p.max_gap_s or 0) * 1000
        is_moving = bool(moving(speed, p))
        fresh = not run.in_run or gap or abs(value - self.anchor) > p.epsilon
        continues = is_moving or not fresh  # a stop pauses a run; it never starts one
        if continues and fresh:
            self.anchor = value
        if not run.step(continues, event_time, event_id, brk=fresh, can_fire=is_moving):
            return None
        ids = run.ids()
        evidence = run_evidence(self.signal, value, run.count, run.duration_s(), p)
        key = (self.signal, ids[0])
        return Alert.make(self.rule, self.entity_id, event_time, ids, evidence, key, self.label)

    def _snapshot(self) -> dict[str, Any]:
        return {**self.run.snapshot(), "anchor": self.anchor}

    def _restore(self, data: Mapping[str, Any]) -> None:
        self.run.restore(data)
        self.anchor = float(data["anchor"])
