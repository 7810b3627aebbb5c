"""Settings of job `vehicles`."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from core.config.base import Settings
from core.contracts import topics
from detectors import (
    BrakingParams,
    FlatlineParams,
    GpsJumpParams,
    SpeedingParams,
    ThresholdParams,
    TrendParams,
    ZScoreParams,
)
from pipeline.settings import Duration, TriggerSettings, WindowSpec

VehicleSignal = Literal[
    "speed_kmh",
    "speed_limit_kmh",
    "rpm",
    "coolant_c",
    "oil_pressure_kpa",
    "fuel_pct",
    "battery_v",
    "tyre_fl_kpa",
    "tyre_fr_kpa",
    "tyre_rl_kpa",
    "tyre_rr_kpa",
    "accel_long_ms2",
    "odometer_km",
    "heading_deg",
    "lat",
    "lon",
]
TYRES: list[VehicleSignal] = ["tyre_fl_kpa", "tyre_fr_kpa", "tyre_rl_kpa", "tyre_rr_kpa"]


class DetectorFields(Settings):
    """What every vehicle detector has besides its thresholds."""

    label: str | None = Field(
        None, description="The label type its alerts target (e.g. overheating), or none."
    )
    enabled: bool = Field(True, description="false: configured but raises no alerts.")


class SeriesSignals(DetectorFields):
    """A rule run once per signal; `signal: x` is short for `signals: [x]`."""

    signals: list[VehicleSignal] = Field(min_length=1, description="One rule state per signal.")

    @model_validator(mode="before")
    @classmethod
    def _one_signal(cls, data: Any) -> Any:
        if isinstance(data, dict) and "signal" in data:
            if "signals" in data:
                raise ValueError("set signal or signals, not both")
            rest = {k: v for k, v in data.items() if k != "signal"}
            return {**rest, "signals": [data["signal"]]}
        return data


class ThresholdDetector(SeriesSignals, ThresholdParams):
    """`threshold` on each signal: beyond `above` / `below` for long enough."""

    rule: Literal["threshold"] = "threshold"


class TrendDetector(SeriesSignals, TrendParams):
    """`trend` on each signal: a least-squares slope per minute beyond a limit."""

    rule: Literal["trend"] = "trend"
    versus_others: bool = Field(
        False,
        description="Take each signal minus the mean of the other signals of this detector "
        "(a leak moves one tyre; warming and cooling move all four together).",
    )


class FlatlineDetector(SeriesSignals, FlatlineParams):
    """`flatline` on each signal: unchanged while the vehicle moves (a stuck sensor)."""

    rule: Literal["flatline"] = "flatline"
    speed_signal: VehicleSignal | None = Field(
        "speed_kmh", description="The speed that says the vehicle moves (unset: always moving)."
    )


class ZScoreDetector(SeriesSignals, ZScoreParams):
    """`zscore` on each signal: far from the vehicle's own EWMA baseline."""

    rule: Literal["zscore"] = "zscore"


class GpsJumpDetector(DetectorFields, GpsJumpParams):
    """`gps_jump` on `lat`/`lon`: consecutive fixes further apart than the vehicle can drive."""

    rule: Literal["gps_jump"] = "gps_jump"


class BrakingDetector(DetectorFields, BrakingParams):
    """`harsh_braking` on `accel_long_ms2`: harsh decelerations counted in a window."""

    rule: Literal["harsh_braking"] = "harsh_braking"
    signal: VehicleSignal = Field("accel_long_ms2", description="Longitudinal acceleration.")


class SpeedingDetector(DetectorFields, SpeedingParams):
    """`speeding` on `speed_kmh` against each reading's `speed_limit_kmh`."""

    rule: Literal["speeding"] = "speeding"
    signal: VehicleSignal = Field("speed_kmh", description="The speed compared with the limit.")


VehicleDetector = Annotated[
    ThresholdDetector
    | TrendDetector
    | FlatlineDetector
    | ZScoreDetector
    | GpsJumpDetector
    | BrakingDetector
    | SpeedingDetector,
    Field(discriminator="rule"),
]

#: The thresholds proposed in docs/vehicles.md, measured on the scenario.
DEFAULT_VEHICLE_DETECTORS: dict[str, dict[str, Any]] = {
    "overheating": {
        "rule": "threshold",
        "label": "overheating",
        "signals": ["coolant_c"],
        "above": 105.0,
        "min_duration_s": 60.0,
    },
    "tyre_leak": {
        "rule": "trend",
        "label": "tyre_leak",
        "signals": TYRES,
        "versus_others": True,
        "falling_below": -0.8,
        "window_s": 600.0,
        "min_span_s": 480.0,
        "min_points": 240,
    },
    "stuck_sensor": {
        "rule": "flatline",
        "label": "stuck_sensor",
        "signals": ["coolant_c", "oil_pressure_kpa", "battery_v", *TYRES],
        "epsilon": 1e-6,
        "min_duration_s": 120.0,
        "min_speed_kmh": 5.0,
        "max_gap_s": 60.0,
    },
    "gps_jump": {"rule": "gps_jump", "label": "gps_jump"},
    "harsh_braking": {
        "rule": "harsh_braking",
        "label": "harsh_braking",
        "decel_ms2": 6.0,
        "min_events": 2,
        "window_s": 300.0,
    },
    "speeding": {
        "rule": "speeding",
        "label": "speeding",
        "tolerance": 0.2,
        "min_duration_s": 60.0,
    },
    "battery_failure": {
        "rule": "threshold",
        "label": "battery_failure",
        "signals": ["battery_v"],
        "below": 12.5,
        "min_duration_s": 30.0,
    },
    "battery_zscore": {  # off: precision 0.24 on the scenario (cold starts, charging swings)
        "rule": "zscore",
        "label": "battery_failure",
        "signals": ["battery_v"],
        "enabled": False,
    },
}


class LateSettings(Settings):
    """What happens to readings that arrive after the watermark has passed them."""

    mode: Literal["drop", "rescore"] = Field(
        "drop",
        description="drop: counted (late_events in the metrics topic) and left out; rescore: "
        "a second detector query with the longer `watermark` below scores them too, and its "
        "alerts the main query did not raise are published with `late: true`.",
    )
    watermark: Duration = Field(
        "30 minutes", description="The rescoring query's watermark (longer than the job's)."
    )
    topic: str = Field(
        topics.ALERTS.name, description="Where late alerts go (`late: true` on each)."
    )


class VehiclesSettings(Settings):
    """Job `vehicles`: per-vehicle window statistics, trips, and the series rules.

    Detector thresholds are the detectors' own models (`detectors/`); `detectors` entries are
    merged key by key onto the defaults of the same name (set `enabled: false` to switch one
    off, or add a new name for another rule).
    """

    stats_topic: str = Field(
        topics.VEHICLE_STATS.name, description="Kafka topic of the per-vehicle window stats."
    )
    trips_topic: str = Field(
        topics.VEHICLE_TRIPS.name, description="Kafka topic of the per-trip summaries."
    )
    stats_windows: list[WindowSpec] = Field(
        default_factory=lambda: [
            WindowSpec(length="1 minute"),
            WindowSpec(length="5 minutes", slide="1 minute"),
        ],
        min_length=1,
        description="Per-vehicle event-time windows of the stats topic.",
    )
    stats_signals: list[VehicleSignal] = Field(
        default_factory=lambda: ["speed_kmh", "coolant_c", "battery_v", *TYRES, "accel_long_ms2"],
        min_length=1,
        description="Signals summarised per window (mean, min, max, percentiles).",
    )
    percentiles: list[float] = Field(
        default_factory=lambda: [0.5, 0.95],
        description="Percentile levels per signal (columns <signal>_p50, ...).",
    )
    percentile_sketch_k: int = Field(
        1_024,
        ge=8,
        le=65_535,
        description="k of the KLL sketches the percentiles are read from: exact for windows "
        "of at most k readings, else a rank error of about 1.33 / k^0.9.",
    )
    trip_gap: Duration = Field(
        "5 minutes", description="Session gap: a longer silence ends a trip (session_window)."
    )
    detectors: dict[str, VehicleDetector] = Field(
        default_factory=lambda: {
            name: _detector(spec) for name, spec in DEFAULT_VEHICLE_DETECTORS.items()
        },
        description="Series rules by name (defaults: the proposal in docs/vehicles.md).",
    )
    vehicle_state_ttl: Duration | None = Field(
        "2 hours",
        description="Forget a vehicle's rule states once the watermark is this far past its "
        "latest reading (event time); unset: keep them forever.",
    )
    max_buffered: int = Field(
        100_000,
        ge=1,
        description="Readings a vehicle may hold for the watermark (the oldest go first).",
    )
    state_buckets: int = Field(
        16,
        ge=1,
        le=100_000,
        description="Buckets of vehicles the rules' state is kept in (the stateful operator's "
        "grouping key): each is one pandas call per batch with its state, however many "
        "vehicles it holds. Part of the checkpoint: change it only with a fresh checkpoint.",
    )
    deadletter_trigger: TriggerSettings = Field(
        TriggerSettings(mode="realtime", interval="5 seconds"),
        description="Trigger of the stateless dead-letter query (Real-time Mode by default).",
    )
    aggregates_interval: Duration | None = Field(
        None,
        description="Micro-batch interval of the stats and trips queries when the job runs in "
        "micro-batches (a window is emitted a watermark after its end anyway: running them "
        "less often leaves the cores to the alerts query); unset: the job's trigger.",
    )
    late: LateSettings = Field(LateSettings(), description="Late readings: drop or rescore.")
    provisional_stats: bool = Field(
        False,
        description="Also run `vehicles.stats-provisional`: the stats in update mode "
        "into the stats topic (not the lake), a row per window each batch that changes it, "
        "marked `final: false`, ahead of the stats query's final row (`final: true`) once the "
        "watermark passes the window's end. One aggregation over every spec's windows (update "
        "mode takes no chained aggregations): a reading counts once per window that holds it.",
    )

    @field_validator("detectors", mode="before")
    @classmethod
    def _merge_defaults(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        merged: dict[str, Any] = dict(DEFAULT_VEHICLE_DETECTORS)
        for name, spec in value.items():
            default = DEFAULT_VEHICLE_DETECTORS.get(name)
            if isinstance(spec, dict) and default is not None:
                same_rule = spec.get("rule", default["rule"]) == default["rule"]
                spec = _merged(default, spec) if same_rule else spec
            merged[name] = spec
        return merged

    @field_validator("percentiles")
    @classmethod
    def _levels(cls, value: list[float]) -> list[float]:
        if any(not 0 < q < 1 for q in value) or len(set(value)) != len(value):
            raise ValueError("percentiles must be distinct levels strictly between 0 and 1")
        return value

    def enabled_detectors(self) -> dict[str, VehicleDetector]:
        return {name: spec for name, spec in self.detectors.items() if spec.enabled}


def _merged(default: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    """`spec` over `default`; a `signal` in `spec` replaces the default `signals`."""
    base = {k: v for k, v in default.items() if not ("signal" in spec and k == "signals")}
    return {**base, **spec}


def _detector(spec: dict[str, Any]) -> VehicleDetector:
    from pydantic import TypeAdapter

    return TypeAdapter(VehicleDetector).validate_python(spec)
