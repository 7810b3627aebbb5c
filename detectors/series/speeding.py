"""Speeding: speed above the limit plus a tolerance, continuously, for long enough.

A reading is speeding when `speed > limit * (1 + tolerance)`, with the limit from the reading's
own `speed_limit_kmh` column (the road's limit) or, where that is missing, `limit_kmh`. Fires
once per run of speeding readings lasting `min_duration_s` (see `detectors.runs`).
Key: the signal and the run's first event id.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import pandas as pd
from pydantic import Field

from detectors.alert import Alert
from detectors.frames import EVENT_TIME, Columns, per_entity
from detectors.params import Thresholds
from detectors.runs import RunTracker, run_fires
from detectors.series.base import SeriesState, series_rows
from detectors.series.threshold import run_alerts, run_evidence

RULE = "speeding"
LIMIT = "speed_limit_kmh"


class SpeedingParams(Thresholds):
    """Thresholds of `speeding`."""

    limit_kmh: float | None = Field(
        130.0, gt=0, le=1_000, description="Limit where a reading carries none (None: skip)."
    )
    tolerance: float = Field(0.1, ge=0, le=2, description="Fraction over the limit tolerated.")
    min_duration_s: float = Field(
        30.0, ge=0, le=86_400, description="Seconds of continuous speeding needed."
    )
    max_gap_s: float | None = Field(
        60.0, gt=0, description="A longer gap between readings ends a run (None: never)."
    )


def effective_limit(limit: Any, params: SpeedingParams) -> Any:
    """The reading's own limit, or `limit_kmh` where it is NaN (floats or arrays)."""
    default = math.nan if params.limit_kmh is None else params.limit_kmh
    if isinstance(limit, np.ndarray):
        return np.where(np.isnan(limit), default, limit)
    return default if math.isnan(limit) else limit


def speeding(speed: Any, limit: Any, params: SpeedingParams) -> Any:
    """True where a reading speeds, on floats or numpy arrays alike (NaN limit: default)."""
    return speed > effective_limit(limit, params) * (1 + params.tolerance)


def _gap_ms(params: SpeedingParams) -> float | None:
    return None if params.max_gap_s is None else params.max_gap_s * 1000


def speeding_alerts(
    df: pd.DataFrame,
    params: SpeedingParams | None = None,
    *,
    signal: str = "speed_kmh",
    label: str | None = RULE,
    columns: Columns = None,
) -> pd.DataFrame:
    """Vectorised form over readings with `speed_kmh` and optional `speed_limit_kmh`.

    >>> rows = pd.DataFrame({"entity_id": "v1", "event_id": list("abc"),
    ...     "event_time": [0, 20_000, 40_000], "speed_kmh": [150, 150, 150]})
    >>> speeding_alerts(rows)[["event_time", "event_ids"]].values.tolist()
    [[40000, ['a', 'b', 'c']]]
    """
    p = params or SpeedingParams()

    def rule_for(entity_id: str, readings: pd.DataFrame) -> list[Alert]:
        limits = readings.get(LIMIT, pd.Series(np.nan, index=readings.index)).to_numpy(float)
        fires, start = run_fires(
            speeding(readings[signal].to_numpy(float), limits, p),
            readings[EVENT_TIME].to_numpy(np.int64),
            1,
            p.min_duration_s * 1000,
            _gap_ms(p),
        )
        extra = {"limit_kmh_used": effective_limit(limits, p)}
        return run_alerts(RULE, entity_id, signal, label, readings, fires, start, p, extra)

    return per_entity(series_rows(df, signal, (LIMIT,), columns), rule_for)


class SpeedingState(SeriesState):
    """Stateful form for one vehicle (see `detectors.series.base`).

    >>> state = SpeedingState("v1")
    >>> [len(state.update(e, t, 150.0)) for e, t in [("a", 0), ("b", 20_000), ("c", 40_000)]]
    [0, 0, 1]
    """

    rule: ClassVar[str] = RULE

    def __init__(
        self,
        entity_id: str,
        params: SpeedingParams | None = None,
        *,
        signal: str = "speed_kmh",
        label: str | None = RULE,
        max_seen: int = 256,
    ) -> None:
        super().__init__(entity_id, signal, label, max_seen)
        self.params = params or SpeedingParams()
        self.run = RunTracker(1, self.params.min_duration_s * 1000, _gap_ms(self.params))

    def fields(self) -> tuple[str, ...]:
        return (self.signal, LIMIT)

    def optional_fields(self) -> tuple[str, ...]:
        return (LIMIT,)

    def update(
        self, event_id: str, event_time: int, speed: float | None, limit: float | None = None
    ) -> list[Alert]:
        return self.push(event_id, event_time, [speed, limit])

    def step(self, event_id: str, event_time: int, values: Sequence[float]) -> Alert | None:
        speed, limit = values
        if not self.run.step(bool(speeding(speed, limit, self.params)), event_time, event_id):
            return None
        ids = self.run.ids()
        evidence = run_evidence(
            self.signal, speed, self.run.count, self.run.duration_s(), self.params
        )
        evidence = {**evidence, "limit_kmh_used": _finite(effective_limit(limit, self.params))}
        key = (self.signal, ids[0])
        return Alert.make(self.rule, self.entity_id, event_time, ids, evidence, key, self.label)

    def _snapshot(self) -> dict[str, Any]:
        return self.run.snapshot()

    def _restore(self, data: Mapping[str, Any]) -> None:
        self.run.restore(data)


def _finite(value: float) -> float | None:
    return None if math.isnan(value) else float(value)
