"""TrendState's running least-squares fit: the same alerts as the exact vectorised form, and
moments that stay exact over a long series (they are refitted as the window turns over)."""

from __future__ import annotations

import json
from collections import deque

import numpy as np
import pandas as pd

from detectors import TrendParams, TrendState, trend_alerts
from detectors.series.trend import WindowFit, _slope


def random_walk(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    times = np.cumsum(rng.integers(500, 1500, n))
    values = 240 + np.cumsum(rng.normal(0, 0.3, n))
    ids = [f"e{i:06}" for i in range(n)]
    return pd.DataFrame({"entity_id": "v1", "event_id": ids, "event_time": times, "x": values})


def test_running_fit_gives_the_exact_forms_alerts_on_a_long_noisy_series() -> None:
    rows = random_walk(20_000, seed=3)
    p = TrendParams(
        falling_below=-0.8, rising_above=0.8, window_s=120, min_span_s=60, min_points=30
    )
    exact = trend_alerts(rows, "x", p)
    state = TrendState("v1", "x", p)
    running = state.update_frame(rows)
    assert len(exact) > 100  # many episodes, many close calls
    assert running["alert_id"].tolist() == exact["alert_id"].tolist()
    slopes = [
        (json.loads(a)["slope_per_min"], json.loads(b)["slope_per_min"])
        for a, b in zip(running["evidence"], exact["evidence"], strict=True)
    ]
    assert all(abs(a - b) <= 1e-6 * max(1.0, abs(b)) for a, b in slopes)


def test_moments_match_a_two_pass_fit_after_many_updates_and_a_snapshot() -> None:
    rows = random_walk(5_000, seed=7)
    p = TrendParams(falling_below=-100.0, window_s=300, min_span_s=60, min_points=5)
    state = TrendState("v1", "x", p)
    half = len(rows) // 2
    state.update_frame(rows.iloc[:half])
    restored = TrendState("v1", "x", p)
    restored.load_json(state.to_json())
    restored.update_frame(rows.iloc[half:])
    exact = _slope(restored.window)
    assert abs(restored.fit.slope() - exact) <= 1e-9 * max(1.0, abs(exact))


def test_fit_without_spread_in_time_has_no_slope() -> None:
    fit = WindowFit()
    fit.add(1_000, 5.0)
    fit.add(1_000, 7.0)
    assert np.isnan(fit.slope())
    fit.refit(deque([(0, 1.0, "a"), (60_000, 3.0, "b")]))
    assert fit.slope() == 2.0
