"""Trend: the least-squares slope of a signal over a time window, beyond a limit.

At each reading, fit a line through the readings of the window `(t - window_s, t]` and take its
slope in units per minute. The trend condition holds when the window has at least `min_points`
readings spanning at least `min_span_s`, and the slope is above `rising_above` or below
`falling_below`. Fires when the condition starts to hold (once per episode, not per reading).
Typical uses: coolant rising faster than 2 °C/min (`overheating`), tyre pressure falling
faster than 0.5 kPa/min (`tyre_leak`). Key: the signal and the firing event id.

A signal can be taken against its siblings first (`versus_others` on a frame, `minus_mean`
per reading): a leak moves one tyre, warming and cooling move all four together.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import pandas as pd
from pydantic import Field, model_validator

from detectors.alert import Alert, Evidence
from detectors.frames import EVENT_ID, EVENT_TIME, Columns, per_entity
from detectors.params import Thresholds
from detectors.reorder import ID_SEPARATOR
from detectors.series.base import SeriesState, series_rows
from detectors.windows import window_bounds

RULE = "trend"


class TrendParams(Thresholds):
    """Thresholds of `trend`. Set `rising_above`, `falling_below` or both."""

    window_s: float = Field(300.0, gt=0, le=7 * 86_400, description="Window length, seconds.")
    rising_above: float | None = Field(
        None, description="Fire when the slope (units per minute) is above this."
    )
    falling_below: float | None = Field(
        None, description="Fire when the slope (units per minute) is below this."
    )
    min_points: int = Field(5, ge=2, le=1_000_000, description="Readings the window needs.")
    min_span_s: float = Field(
        60.0, gt=0, description="Seconds the window's readings must span (first to last)."
    )

    @model_validator(mode="after")
    def _has_limit(self) -> TrendParams:
        if self.rising_above is None and self.falling_below is None:
            raise ValueError("set at least one of rising_above, falling_below")
        if self.min_span_s >= self.window_s:
            raise ValueError("min_span_s must be below window_s (a window spans less)")
        return self

    @property
    def window_ms(self) -> int:
        return max(1, round(self.window_s * 1000))


def trending(slope: Any, points: Any, span_s: Any, params: TrendParams) -> Any:
    """The trend condition, on floats or numpy arrays alike (a NaN slope never holds)."""
    steep: Any = False
    if params.rising_above is not None:
        steep = steep | (slope > params.rising_above)
    if params.falling_below is not None:
        steep = steep | (slope < params.falling_below)
    return (points >= params.min_points) & (span_s >= params.min_span_s) & steep


def trend_evidence(
    signal: str, value: float, slope: float, points: int, span_s: float, params: TrendParams
) -> Evidence:
    return {
        "signal": signal,
        "value": float(value),
        "slope_per_min": float(slope),
        "points": int(points),
        "span_s": float(span_s),
        **params.model_dump(),
    }


def rolling_slope(times_ms: np.ndarray, values: np.ndarray, window_ms: int) -> np.ndarray:
    """Least-squares slope per minute over each reading's window (NaN when undefined)."""
    index = pd.to_datetime(times_ms, unit="ms")
    seconds = pd.Series((times_ms - times_ms[0]) / 1000.0, index=index)
    series = pd.Series(values, index=index)
    window = f"{window_ms}ms"
    cov = series.rolling(window).cov(seconds)
    var = seconds.rolling(window).var()
    with np.errstate(invalid="ignore", divide="ignore"):
        slope = (cov / var).to_numpy() * 60.0
    return np.where(var.to_numpy() > 0, slope, np.nan)


def trend_alerts(
    df: pd.DataFrame,
    signal: str,
    params: TrendParams,
    *,
    label: str | None = None,
    columns: Columns = None,
) -> pd.DataFrame:
    """Vectorised form over readings with a `signal` column.

    >>> rows = pd.DataFrame({"entity_id": "v1", "event_id": [f"e{i:02}" for i in range(10)],
    ...     "event_time": [i * 30_000 for i in range(10)],
    ...     "coolant_c": [90.0] * 5 + [92.0, 94.0, 96.0, 98.0, 100.0]})
    >>> p = TrendParams(rising_above=2.0)
    >>> trend_alerts(rows, "coolant_c", p, label="overheating")["event_time"].tolist()
    [270000]
    """

    def rule_for(entity_id: str, readings: pd.DataFrame) -> list[Alert]:
        times = readings[EVENT_TIME].to_numpy(np.int64)
        values = readings[signal].to_numpy(float)
        left, _ = window_bounds(times, params.window_ms)
        index = np.arange(len(times))
        points = index - left + 1
        span_s = (times - times[left]) / 1000.0
        slope = rolling_slope(times, values, params.window_ms)
        holds = trending(slope, points, span_s, params)
        fires = holds & ~np.concatenate([[False], holds[:-1]])
        ids = readings[EVENT_ID].tolist()
        alerts = []
        for i in np.flatnonzero(fires):
            evidence = trend_evidence(signal, values[i], slope[i], points[i], span_s[i], params)
            key = (signal, ids[i])
            window_ids = ids[left[i] : i + 1]
            alerts.append(Alert.make(RULE, entity_id, times[i], window_ids, evidence, key, label))
        return alerts

    return per_entity(series_rows(df, signal, (), columns), rule_for)


class TrendState(SeriesState):
    """Stateful form: the window's readings per vehicle and signal (`detectors.series.base`).

    >>> state = TrendState("v1", "coolant_c", TrendParams(rising_above=2.0))
    >>> values = [90.0] * 5 + [92.0, 94.0, 96.0, 98.0, 100.0]
    >>> [len(state.update(f"e{i}", i * 30_000, v)) for i, v in enumerate(values)]
    [0, 0, 0, 0, 0, 0, 0, 0, 0, 1]
    """

    rule: ClassVar[str] = RULE

    def __init__(
        self,
        entity_id: str,
        signal: str,
        params: TrendParams,
        *,
        label: str | None = None,
        max_seen: int = 256,
    ) -> None:
        super().__init__(entity_id, signal, label, max_seen)
        self.params = params
        self.window: deque[tuple[int, float, str]] = deque()
        self.holding = False
        self.fit = WindowFit()

    def update(self, event_id: str, event_time: int, value: float | None) -> list[Alert]:
        return self.push(event_id, event_time, [value])

    def step(self, event_id: str, event_time: int, values: Sequence[float]) -> Alert | None:
        p, window, fit = self.params, self.window, self.fit
        window.append((event_time, values[0], event_id))
        fit.add(event_time, values[0])
        start = event_time - p.window_ms
        while window[0][0] <= start:
            t, v, _ = window.popleft()
            fit.remove(t, v)
        if fit.updates > 2 * len(window) + 16:
            fit.refit(window)  # bound the rounding the running updates accumulate
        points, span_s = len(window), (event_time - window[0][0]) / 1000.0
        was = self.holding
        if points < p.min_points or span_s < p.min_span_s:
            self.holding = False
            return None
        slope = fit.slope() if window[0][0] != event_time else float("nan")
        if _near_limit(slope, p) or fit.sxx < 1e-3:
            slope = _slope(window)  # the exact two-pass fit decides close calls
        self.holding = bool(trending(slope, points, span_s, p))
        if was or not self.holding:
            return None
        evidence = trend_evidence(self.signal, values[0], _slope(window), points, span_s, p)
        ids = [e for _, _, e in window]
        key = (self.signal, event_id)
        return Alert.make(self.rule, self.entity_id, event_time, ids, evidence, key, self.label)

    def _snapshot(self) -> dict[str, Any]:
        return {
            "window": [list(r) for r in self.window],
            "holding": self.holding,
            "fit": self.fit.snapshot(),
        }

    def columns_snapshot(self) -> dict[str, Any]:
        """`snapshot()` with the window as columns, for a binary store (pickle): `window` is
        None and `columns` holds its times (int64 array), values (float64 array) and event
        ids (one string, `ID_SEPARATOR`-joined, or a list where an id holds the separator).
        Restores faster than the JSON snapshot's list of rows; `columns_restore` reads it.

        >>> state = TrendState("v1", "coolant_c", TrendParams(rising_above=2.0))
        >>> _ = state.update("e1", 1_000, 90.0), state.update("e2", 2_000, 91.0)
        >>> again = TrendState("v1", "coolant_c", TrendParams(rising_above=2.0))
        >>> again.columns_restore(state.columns_snapshot())
        >>> list(again.window) == list(state.window)
        True
        """
        window = self.window
        self.window = deque()
        try:
            data = self.snapshot()
        finally:
            self.window = window
        n = len(window)
        ids = [r[2] for r in window]
        joined = ID_SEPARATOR.join(ids)
        data["rule"]["window"] = None
        data["columns"] = (
            np.fromiter((r[0] for r in window), np.int64, n),
            np.fromiter((r[1] for r in window), np.float64, n),
            joined if joined.count(ID_SEPARATOR) == max(0, n - 1) else ids,
        )
        return data

    def columns_restore(self, data: Mapping[str, Any]) -> None:
        times, values, ids = data["columns"]
        self.restore({**data, "rule": {**data["rule"], "window": ()}})
        if isinstance(ids, str):
            ids = ids.split(ID_SEPARATOR) if len(times) else []
        self.window = deque(zip(times.tolist(), values.tolist(), ids, strict=True))

    def _restore(self, data: Mapping[str, Any]) -> None:
        # map(tuple) at C speed: the snapshot's JSON already reads back as (int, float, str)
        self.window = deque(map(tuple, data["window"]))
        self.holding = bool(data["holding"])
        if data.get("fit") is not None:
            self.fit.restore(data["fit"])
        else:
            self.fit.refit(self.window)


def _near_limit(slope: float, params: TrendParams) -> bool:
    """True when a running-sum slope is too close to a limit to trust its rounding."""
    for limit in (params.rising_above, params.falling_below):
        if limit is not None and abs(slope - limit) <= 1e-6 * (abs(limit) + abs(slope)) + 1e-9:
            return True
    return False


class WindowFit:
    """Running least-squares moments of (seconds, value) over a window, with add and remove.

    O(1) per reading instead of a pass over the window; `refit` recomputes them exactly (two
    passes) and `TrendState` calls it once the window has turned over, so rounding never
    accumulates, and falls back to the exact `_slope` near a limit, so decisions are those of
    the exact fit.

    >>> fit = WindowFit()
    >>> for t, v in [(0, 1.0), (60_000, 2.0), (120_000, 3.0), (180_000, 5.0)]:
    ...     fit.add(t, v)
    >>> fit.remove(0, 1.0)
    >>> round(fit.slope(), 9)  # per minute, over the last three readings
    1.5
    """

    __slots__ = ("mean_t", "mean_v", "n", "origin", "sxx", "sxy", "updates")

    def __init__(self) -> None:
        self.origin = 0
        self.n, self.updates = 0, 0
        self.mean_t = self.mean_v = self.sxx = self.sxy = 0.0

    def add(self, time_ms: int, value: float) -> None:
        if self.n == 0:
            self.origin = time_ms
        x = (time_ms - self.origin) / 1000.0
        self.n += 1
        self.updates += 1
        dx = x - self.mean_t
        self.mean_t += dx / self.n
        self.mean_v += (value - self.mean_v) / self.n
        self.sxx += dx * (x - self.mean_t)
        self.sxy += dx * (value - self.mean_v)

    def remove(self, time_ms: int, value: float) -> None:
        if self.n <= 1:
            self.__init__()  # type: ignore[misc]
            return
        x = (time_ms - self.origin) / 1000.0
        dx = x - self.mean_t
        self.n -= 1
        self.updates += 1
        self.mean_t -= dx / self.n
        dv = value - self.mean_v
        self.mean_v -= dv / self.n
        self.sxx -= dx * (x - self.mean_t)
        self.sxy -= dx * (value - self.mean_v)

    def slope(self) -> float:
        """Per minute; NaN without spread in time."""
        return self.sxy / self.sxx * 60.0 if self.sxx > 0 else float("nan")

    def refit(self, window: deque[tuple[int, float, str]]) -> None:
        """The exact moments of `window` (two passes), measured from its first reading."""
        self.__init__()  # type: ignore[misc]
        if not window:
            return
        self.origin, self.n = window[0][0], len(window)
        xs = [(t - self.origin) / 1000.0 for t, _, _ in window]
        self.mean_t = sum(xs) / self.n
        self.mean_v = sum(v for _, v, _ in window) / self.n
        self.sxx = sum((x - self.mean_t) ** 2 for x in xs)
        self.sxy = sum(
            (x - self.mean_t) * (v - self.mean_v) for x, (_, v, _) in zip(xs, window, strict=True)
        )

    def snapshot(self) -> list[float]:
        return [self.origin, self.n, self.updates, self.mean_t, self.mean_v, self.sxx, self.sxy]

    def restore(self, data: Sequence[float]) -> None:
        origin, n, updates, self.mean_t, self.mean_v, self.sxx, self.sxy = data
        self.origin, self.n, self.updates = int(origin), int(n), int(updates)


def _slope(window: deque[tuple[int, float, str]]) -> float:
    """Least-squares slope per minute, two-pass (NaN for fewer than two distinct times)."""
    n = len(window)
    t0 = window[0][0]
    mean_t = sum(t - t0 for t, _, _ in window) / n / 1000.0
    mean_v = sum(v for _, v, _ in window) / n
    sxx = sum(((t - t0) / 1000.0 - mean_t) ** 2 for t, _, _ in window)
    sxy = sum(((t - t0) / 1000.0 - mean_t) * (v - mean_v) for t, v, _ in window)
    return sxy / sxx * 60.0 if sxx > 0 else float("nan")


def versus_others(readings: pd.DataFrame, signals: Sequence[str]) -> pd.DataFrame:
    """Each signal minus the mean of the others (NaN when any of them is missing).

    >>> rows = pd.DataFrame({"a": [240.0, 238.0], "b": [242.0, 242.0], "c": [244.0, 244.0]})
    >>> versus_others(rows, ["a", "b", "c"])["a"].tolist()
    [-3.0, -5.0]
    """
    values = {s: pd.to_numeric(readings[s], errors="coerce").astype("float64") for s in signals}

    def mean_of_others(signal: str) -> pd.Series:
        others = [values[o] for o in signals if o != signal]  # summed in order, as minus_mean
        total = others[0]
        for other in others[1:]:
            total = total + other
        return total / len(others)

    return readings.assign(**{s: values[s] - mean_of_others(s) for s in signals})


def minus_mean(value: float | None, others: Sequence[float | None]) -> float | None:
    """`value` minus the mean of `others`, as `versus_others` computes it (None if any is).

    >>> minus_mean(240.0, [242.0, 244.0]), minus_mean(240.0, [None, 244.0])
    (-3.0, None)
    """
    if value is None or any(o is None for o in others):
        return None
    return value - sum(others) / len(others)  # type: ignore[arg-type]
