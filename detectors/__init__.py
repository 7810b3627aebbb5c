"""Detection rules as plain Python, importable without Spark.

One implementation per rule; each rule's predicate is a single function that works on floats
and on numpy arrays, and every form below calls it:

- **Per request** (the fraud endpoint): `check_travel`, `check_velocity`, `check_spending`, or
  the per-card states' `check(...)` (no mutation; microseconds, no pandas). The last-use
  updater calls `add(...)` on the same states.
- **Per key, vectorised** (`groupBy(key).applyInPandas(fn, ALERT_SPARK_DDL)`, batch oracles):
  `travel_alerts`, `velocity_alerts`, `spending_alerts`, `gps_jump_alerts`,
  `threshold_alerts`, `speeding_alerts`, `flatline_alerts`, `zscore_alerts`, `step_alerts`,
  `silence_alerts`, `trend_alerts`, `braking_alerts`. They sort by event time and drop
  duplicate event ids first.
- **Stateful** (`transformWithStateInPandas`): `TravelState`, `VelocityState`,
  `SpendingState`, `GpsJumpState` (per card or vehicle, `update(...)` per row), `TerminalState`
  (per merchant; the endpoint's) and the series
  states (`update_frame(rows, watermark_ms)`, which buffers to the watermark). Keep a state in
  one `ValueState` column `state STRING` with `to_json()` / `load_json()`.
- **On Spark SQL aggregates** (`window()` + `count`, `sum`, `approx_count_distinct`):
  `velocity_window_alerts`, `terminal_window_alerts`, and `spending_feature_alerts` (with a
  `percentile_approx` median); `velocity_window_features` / `terminal_window_features`
  compute the same aggregates in pandas.

Every rule reports `Alert`s, or a DataFrame with `ALERT_COLUMNS` (schema `ALERT_SPARK_DDL`).
Vectorised inputs use the canonical columns `entity_id`, `event_id`, `event_time` (epoch ms);
map other names with `columns={"entity_id": "card_token"}`.
"""

from detectors.alert import (
    ALERT_COLUMNS,
    ALERT_SPARK_DDL,
    Alert,
    alert_id_for,
    alerts_to_frame,
    frame_to_alerts,
)
from detectors.cards.spending import (
    SpendingFeatures,
    SpendingParams,
    SpendingState,
    check_spending,
    spending_alerts,
    spending_feature_alerts,
    spending_features,
)
from detectors.cards.terminal import (
    TerminalParams,
    TerminalState,
    check_terminal_window,
    terminal_window_alerts,
    terminal_window_features,
)
from detectors.cards.travel import Position, TravelParams, TravelState, check_travel, travel_alerts
from detectors.cards.velocity import (
    VelocityFeatures,
    VelocityParams,
    VelocityState,
    check_velocity,
    check_velocity_window,
    velocity_alerts,
    velocity_window_alerts,
    velocity_window_features,
)
from detectors.dedup import SeenIds
from detectors.geo import geodesic_km, geodesic_km_array, haversine_km
from detectors.params import Thresholds
from detectors.reorder import EventTimeBuffer
from detectors.series.base import SeriesState
from detectors.series.braking import BrakingParams, BrakingState, braking_alerts
from detectors.series.flatline import FlatlineParams, FlatlineState, flatline_alerts
from detectors.series.jump import GpsJumpParams, GpsJumpState, gps_jump_alerts
from detectors.series.silence import SilenceParams, SilenceState, silence_alerts
from detectors.series.speeding import SpeedingParams, SpeedingState, speeding_alerts
from detectors.series.step import StepParams, StepState, step_alerts
from detectors.series.threshold import ThresholdParams, ThresholdState, threshold_alerts
from detectors.series.trend import TrendParams, TrendState, trend_alerts
from detectors.series.zscore import ZScoreParams, ZScoreState, zscore_alerts

__all__ = [
    "ALERT_COLUMNS",
    "ALERT_SPARK_DDL",
    "Alert",
    "BrakingParams",
    "BrakingState",
    "EventTimeBuffer",
    "FlatlineParams",
    "FlatlineState",
    "GpsJumpParams",
    "GpsJumpState",
    "Position",
    "SeenIds",
    "SeriesState",
    "SilenceParams",
    "SilenceState",
    "SpeedingParams",
    "SpeedingState",
    "SpendingFeatures",
    "SpendingParams",
    "SpendingState",
    "StepParams",
    "StepState",
    "TerminalParams",
    "TerminalState",
    "ThresholdParams",
    "ThresholdState",
    "Thresholds",
    "TravelParams",
    "TravelState",
    "TrendParams",
    "TrendState",
    "VelocityFeatures",
    "VelocityParams",
    "VelocityState",
    "ZScoreParams",
    "ZScoreState",
    "alert_id_for",
    "alerts_to_frame",
    "braking_alerts",
    "check_spending",
    "check_terminal_window",
    "check_travel",
    "check_velocity",
    "check_velocity_window",
    "flatline_alerts",
    "frame_to_alerts",
    "geodesic_km",
    "geodesic_km_array",
    "gps_jump_alerts",
    "haversine_km",
    "silence_alerts",
    "speeding_alerts",
    "spending_alerts",
    "spending_feature_alerts",
    "spending_features",
    "step_alerts",
    "terminal_window_alerts",
    "terminal_window_features",
    "threshold_alerts",
    "travel_alerts",
    "trend_alerts",
    "velocity_alerts",
    "velocity_window_alerts",
    "velocity_window_features",
    "zscore_alerts",
]
