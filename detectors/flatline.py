"""Flatline (stuck sensor): a signal that stops changing while the vehicle moves.

A run is a stretch of consecutive moving readings whose values all stay within `epsilon` of
the run's first value (its anchor). Moving means `speed_kmh >= min_speed_kmh` (a missing speed
is not moving; with `speed_col=None` every reading counts as moving). A value further than
`epsilon` from the anchor starts a new run anchored on itself; a stationary reading or a gap
longer than `max_gap_s` ends the run. Fires once per run, when it has lasted
`min_duration_s`. Anchoring (rather than comparing each value with the previous one) keeps a
slow, steady drift, such as a tyre losing pressure, from looking stuck.
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
from detectors.runs import RunTracker, run_fires, run_starts
from detectors.series import SeriesState, series_rows
from detectors.threshold import run_alerts, run_evidence

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
        5.0, ge=0, le=1_000, description="The vehicle counts as moving at this speed or more."
    )
    max_gap_s: float | None = Field(
        60.0, gt=0, description="A longer gap between readings ends a run (None: never)."
    )


def moving(speed: Any, params: FlatlineParams) -> Any:
    """True where the vehicle moves (a NaN speed does not), on floats or arrays alike."""
    return speed >= params.min_speed_kmh


def anchor_starts(
    values: NDArray[np.float64],
    times: NDArray[np.int64],
    is_moving: NDArray[np.bool_],
    params: FlatlineParams,
) -> NDArray[np.bool_]:
    """True where a run starts: the stateful form's anchor resets, computed in bulk.

    Two readings within `epsilon` of one anchor are within `2 * epsilon` of each other, so a
    step larger than that always starts a run. Those cheap breaks cut the series into segments;
    only segments long enough to fire are scanned anchor by anchor (one numpy search per run).
    """
    gap_ms = None if params.max_gap_s is None else params.max_gap_s * 1000
    step = np.abs(np.diff(values)) > 2.000001 * params.epsilon + 1e-12
    starts = run_starts(is_moving, times, gap_ms, np.concatenate([[False], step]))
    bounds = np.flatnonzero(starts)
    ends = np.append(bounds[1:], len(values)) if bounds.size else bounds
    for lo, hi in zip(bounds, ends, strict=True):
        hi = lo + int(np.argmin(is_moving[lo:hi])) if not is_moving[lo:hi].all() else hi
        if times[hi - 1] - times[lo] < params.min_duration_s * 1000:
            continue
        anchor = lo
        while anchor < hi:
            away = np.abs(values[anchor + 1 : hi] - values[anchor]) > params.epsilon
            if not away.any():
                break
            anchor += 1 + int(np.argmax(away))
            starts[anchor] = True
    return starts


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
    gap_ms = None if p.max_gap_s is None else p.max_gap_s * 1000

    def rule_for(entity_id: str, readings: pd.DataFrame) -> list[Alert]:
        values = readings[signal].to_numpy(float)
        times = readings[EVENT_TIME].to_numpy(np.int64)
        if speed_col is None:
            is_moving = np.ones(len(values), bool)
        else:
            is_moving = moving(readings[speed_col].to_numpy(float), p)
        starts = anchor_starts(values, times, is_moving, p)
        fires, start = run_fires(is_moving, times, 1, p.min_duration_s * 1000, gap_ms, starts)
        return run_alerts(RULE, entity_id, signal, label, readings, fires, start, p)

    required = () if speed_col is None else (speed_col,)
    return per_entity(series_rows(df, signal, (), columns, required), rule_for)


class FlatlineState(SeriesState):
    """Stateful form for one vehicle and signal (see `detectors.series`).

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
        self.run = RunTracker(1, self.params.min_duration_s * 1000, gap_ms)
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
        if is_moving and fresh:
            self.anchor = value
        if not run.step(is_moving, event_time, event_id, brk=fresh):
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
