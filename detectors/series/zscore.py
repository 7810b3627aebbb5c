"""EWMA z-score: a reading far from the vehicle's own baseline for that signal.

The baseline is the mean and variance of the signal's earlier readings: exponentially weighted
with `alpha` (recent readings count more), or plain cumulative when `alpha` is None. A reading
is scored against the baseline *before* it, then folded in:

    z = (value - mean) / max(std, min_std);   fire when count >= warmup and |z| > z_max

Incremental state: mean, variance and count. Fires per reading. Key: signal and event id.
Typical use: battery voltage dropping away from its own normal level (`battery_failure`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import pandas as pd
from pydantic import Field

from detectors.alert import Alert, Evidence
from detectors.frames import EVENT_ID, EVENT_TIME, Columns, per_entity
from detectors.params import Thresholds
from detectors.series.base import SeriesState, series_rows

RULE = "zscore"


class ZScoreParams(Thresholds):
    """Thresholds of `zscore`."""

    z_max: float = Field(4.0, gt=0, le=1_000, description="Fire when |z| is above this.")
    alpha: float | None = Field(
        0.05, gt=0, lt=1, description="EWMA weight of each new reading (None: cumulative)."
    )
    warmup: int = Field(30, ge=2, le=1_000_000, description="Readings before it can fire.")
    min_std: float = Field(1e-6, gt=0, description="Floor under the baseline's standard deviation.")


def z_fires(z: Any, count: Any, params: ZScoreParams) -> Any:
    """The rule, on floats or numpy arrays alike (`count`: readings before this one)."""
    return (count >= params.warmup) & (abs(z) > params.z_max)


def z_score(value: Any, mean: Any, var: Any, params: ZScoreParams) -> Any:
    """The z-score against a baseline, with the std floored at `min_std`."""
    return (value - mean) / np.maximum(np.sqrt(var), params.min_std)


def z_evidence(
    signal: str, value: float, mean: float, var: float, z: float, count: int, params: ZScoreParams
) -> Evidence:
    return {
        "signal": signal,
        "value": float(value),
        "mean": float(mean),
        "std": math.sqrt(max(float(var), 0.0)),
        "z": float(z),
        "count": int(count),
        **params.model_dump(),
    }


def baseline(values: pd.Series, params: ZScoreParams) -> tuple[pd.Series, pd.Series]:
    """Mean and variance of the readings *before* each one (NaN for the first)."""
    if params.alpha is None:
        mean, var = values.expanding().mean(), values.expanding().var(ddof=0)
    else:
        weighted = values.ewm(alpha=params.alpha, adjust=False)
        mean, var = weighted.mean(), weighted.var(bias=True)
    return mean.shift(1), var.shift(1)


def zscore_alerts(
    df: pd.DataFrame,
    signal: str,
    params: ZScoreParams | None = None,
    *,
    label: str | None = None,
    columns: Columns = None,
) -> pd.DataFrame:
    """Vectorised form over readings with a `signal` column.

    >>> volts = [12.6 + 0.01 * (i % 3) for i in range(40)] + [11.0]
    >>> rows = pd.DataFrame({"entity_id": "v1", "event_id": [f"e{i:02}" for i in range(41)],
    ...     "event_time": [i * 1_000 for i in range(41)], "battery_v": volts})
    >>> zscore_alerts(rows, "battery_v")["event_ids"].tolist()
    [['e40']]
    """
    p = params or ZScoreParams()

    def rule_for(entity_id: str, readings: pd.DataFrame) -> list[Alert]:
        values = readings[signal].astype(float)
        mean, var = baseline(values, p)
        z = z_score(values.to_numpy(), mean.to_numpy(), var.to_numpy(), p)
        count = np.arange(len(values))
        alerts = []
        for i in np.flatnonzero(z_fires(z, count, p)):
            evidence = z_evidence(signal, values.iat[i], mean.iat[i], var.iat[i], z[i], int(i), p)
            event_id = str(readings[EVENT_ID].iat[i])
            time = int(readings[EVENT_TIME].iat[i])
            key = (signal, event_id)
            alerts.append(Alert.make(RULE, entity_id, time, (event_id,), evidence, key, label))
        return alerts

    return per_entity(series_rows(df, signal, (), columns), rule_for)


class ZScoreState(SeriesState):
    """Stateful form: mean, variance and count per vehicle and signal (`detectors.series.base`).

    >>> state = ZScoreState("v1", "battery_v", ZScoreParams(warmup=5))
    >>> [len(state.update(f"e{i}", i, v)) for i, v in enumerate([12.6, 12.7] * 3 + [9.0])]
    [0, 0, 0, 0, 0, 0, 1]
    """

    rule: ClassVar[str] = RULE

    def __init__(
        self,
        entity_id: str,
        signal: str,
        params: ZScoreParams | None = None,
        *,
        label: str | None = None,
        max_seen: int = 256,
    ) -> None:
        super().__init__(entity_id, signal, label, max_seen)
        self.params = params or ZScoreParams()
        self.mean, self.var, self.count = 0.0, 0.0, 0

    def update(self, event_id: str, event_time: int, value: float | None) -> list[Alert]:
        return self.push(event_id, event_time, [value])

    def step(self, event_id: str, event_time: int, values: Sequence[float]) -> Alert | None:
        value, p = values[0], self.params
        z = float(z_score(value, self.mean, self.var, p))
        alert = None
        if z_fires(z, self.count, p):
            evidence = z_evidence(self.signal, value, self.mean, self.var, z, self.count, p)
            key = (self.signal, event_id)
            alert = Alert.make(
                self.rule, self.entity_id, event_time, (event_id,), evidence, key, self.label
            )
        self._fold(value)
        return alert

    def _fold(self, value: float) -> None:
        if self.count == 0:
            self.mean, self.var = value, 0.0
        elif self.params.alpha is None:
            delta = value - self.mean
            self.mean += delta / (self.count + 1)
            self.var += (delta * (value - self.mean) - self.var) / (self.count + 1)
        else:
            delta = value - self.mean
            step = self.params.alpha * delta
            self.mean += step
            self.var = (1 - self.params.alpha) * (self.var + delta * step)
        self.count += 1

    def _snapshot(self) -> dict[str, Any]:
        return {"mean": self.mean, "var": self.var, "count": self.count}

    def _restore(self, data: Mapping[str, Any]) -> None:
        self.mean, self.var = float(data["mean"]), float(data["var"])
        self.count = int(data["count"])
