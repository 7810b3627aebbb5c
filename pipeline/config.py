"""Pipeline settings (kind: pipeline): inputs, watermark, windows, trigger, outputs."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from core.config.base import Settings
from detectors import (
    BrakingParams,
    FlatlineParams,
    GpsJumpParams,
    SpeedingParams,
    SpendingParams,
    TerminalParams,
    ThresholdParams,
    TravelParams,
    TrendParams,
    VelocityParams,
    ZScoreParams,
)

Duration = Annotated[
    str,
    Field(
        pattern=r"^\d+ (millisecond|second|minute|hour|day)s?$",
        description="A Spark interval such as '30 seconds' or '10 minutes'.",
    ),
]


class TriggerSettings(Settings):
    mode: Literal["microbatch", "realtime", "available_now"] = Field(
        "microbatch",
        description="microbatch; realtime (Spark's Real-time Mode, stateless queries only in "
        "Spark 4.2); available_now (process what is there, then stop).",
    )
    interval: Duration = Field(
        "0 seconds",
        description="Micro-batch interval, or the checkpoint interval in real-time mode.",
    )


UNIT_MS = {"millisecond": 1, "second": 1000, "minute": 60_000, "hour": 3_600_000, "day": 86_400_000}


def duration_ms(duration: str) -> int:
    """Milliseconds of a Spark interval such as '10 minutes'.

    >>> duration_ms("10 minutes"), duration_ms("1 hour"), duration_ms("250 milliseconds")
    (600000, 3600000, 250)
    """
    amount, unit = duration.split()
    return int(amount) * UNIT_MS[unit.removesuffix("s")]


class WindowSpec(Settings):
    """An event-time window: tumbling (no slide) or sliding."""

    length: Duration = Field(description="Window length, e.g. '10 minutes'.")
    slide: Duration | None = Field(
        None, description="Slide interval for a sliding window; unset: tumbling."
    )

    @model_validator(mode="after")
    def _slide_fits(self) -> WindowSpec:
        if self.slide is not None and not 0 < duration_ms(self.slide) <= duration_ms(self.length):
            raise ValueError("slide must be > 0 and at most the window length")
        if duration_ms(self.length) <= 0:
            raise ValueError("length must be > 0")
        return self

    @property
    def length_ms(self) -> int:
        return duration_ms(self.length)

    @property
    def slide_ms(self) -> int:
        return self.length_ms if self.slide is None else duration_ms(self.slide)


CardRule = Literal["velocity", "compromised_terminal", "impossible_travel", "spending_anomaly"]
CARD_RULES: tuple[CardRule, ...] = (
    "velocity",
    "compromised_terminal",
    "impossible_travel",
    "spending_anomaly",
)


class CardVelocitySettings(Settings):
    """Job `card-velocity`: card features, fraud rules, and where their results go.

    Thresholds are the detectors' own models (the same keys the fraud endpoint takes). The
    velocity and terminal rules run on windows of their own `window_s` sliding by
    `rule_slide`.
    """

    features_topic: str = Field(
        "aggregates.card-features", description="Kafka topic for the per-card window features."
    )
    feature_windows: list[WindowSpec] = Field(
        default_factory=lambda: [
            WindowSpec(length="1 minute"),
            WindowSpec(length="10 minutes", slide="1 minute"),
            WindowSpec(length="1 hour", slide="10 minutes"),
        ],
        min_length=1,
        description="Per-card event-time windows of the features topic.",
    )
    distinct_rsd: float = Field(
        0.05,
        ge=0.01,
        le=0.3,
        description="Relative standard deviation of approx_count_distinct (HyperLogLog++).",
    )
    rules: list[CardRule] = Field(
        default_factory=lambda: list(CARD_RULES),
        min_length=1,
        description="Which rules raise alerts.",
    )
    velocity: VelocityParams = Field(
        VelocityParams(), description="Card testing; also sets features' small amount."
    )
    terminal: TerminalParams = Field(TerminalParams(), description="Compromised terminal.")
    rule_slide: Duration | None = Field(
        "1 minute",
        description="Slide of the velocity and terminal rules' windows: a burst shorter than "
        "window - slide falls whole into one window, and alerts once, at the window that first "
        "crosses the threshold. Unset (or the window's length): tumbling windows, which may "
        "split a burst at a boundary.",
    )
    travel: TravelParams = Field(TravelParams(), description="Impossible travel.")
    spending: SpendingParams = Field(SpendingParams(), description="Account takeover.")
    card_state_ttl: Duration | None = Field(
        "30 days",
        description="Forget a card's travel and spending state once the watermark is this far "
        "past its latest transaction (event time); unset: keep it forever.",
    )
    deadletter_trigger: TriggerSettings = Field(
        TriggerSettings(mode="realtime", interval="5 seconds"),
        description="Trigger of the stateless dead-letter query (Real-time Mode by default).",
    )

    @model_validator(mode="after")
    def _slide_fits(self) -> CardVelocitySettings:
        slide = self.rule_slide_ms
        shortest = min(self.velocity.window_ms, round(self.terminal.window_s * 1000))
        if slide is not None and not 0 < slide <= shortest:
            raise ValueError(
                f"rule_slide must be > 0 and at most the rules' shortest window ({shortest} ms)"
            )
        return self

    @property
    def rule_slide_ms(self) -> int | None:
        return None if self.rule_slide is None else duration_ms(self.rule_slide)


#: Numeric `vehicle.telemetry/1` fields a vehicle detector or statistic may read.
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

#: The thresholds proposed in docs/connected-vehicles.md, measured on the scenario.
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
    topic: str = Field("alerts", description="Where late alerts go (`late: true` on each).")


class VehicleTelemetrySettings(Settings):
    """Job `vehicle-telemetry`: per-vehicle window statistics, trips, and the series rules.

    Detector thresholds are the detectors' own models (`detectors/`); `detectors` entries are
    merged key by key onto the defaults of the same name (set `enabled: false` to switch one
    off, or add a new name for another rule).
    """

    stats_topic: str = Field(
        "aggregates.vehicle-stats", description="Kafka topic of the per-vehicle window stats."
    )
    trips_topic: str = Field(
        "aggregates.vehicle-trips", description="Kafka topic of the per-trip summaries."
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
        description="percentile_approx levels per signal (columns <signal>_p50, ...).",
    )
    percentile_accuracy: int = Field(
        10_000,
        ge=1,
        le=1_000_000,
        description="percentile_approx accuracy: relative rank error 1/accuracy (exact for "
        "windows with fewer readings).",
    )
    trip_gap: Duration = Field(
        "5 minutes", description="Session gap: a longer silence ends a trip (session_window)."
    )
    detectors: dict[str, VehicleDetector] = Field(
        default_factory=lambda: {
            name: _detector(spec) for name, spec in DEFAULT_VEHICLE_DETECTORS.items()
        },
        description="Series rules by name (defaults: the proposal in docs/connected-vehicles.md).",
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


class PipelineConfig(Settings):
    kind: Literal["pipeline"] = "pipeline"
    job: str = Field(description="Which job this configures, e.g. window-counts.")
    input_topics: list[str] = Field(min_length=1, description="Kafka topics to read.")
    output_topic: str = Field(description="Kafka topic for the job's results.")
    deadletter_topic: str = Field("deadletter", description="Where malformed records go.")
    starting_offsets: str = Field(
        "earliest",
        description='earliest, latest, or Spark\'s JSON form {"topic": {"0": 42}}.',
    )
    max_offsets_per_trigger: int | None = Field(None, ge=1, description="Rate limit per batch.")
    entity_key: str = Field("entity_id", description="The event field that names the entity.")
    watermark: Duration = Field("30 seconds", description="How late an event may be.")
    window: Duration = Field("1 minute", description="Tumbling event-time window length.")
    trigger: TriggerSettings = Field(
        TriggerSettings(),
        description="Trigger of the job's queries; a stateful query asked for realtime runs in "
        "micro-batches (Spark 4.2's Real-time Mode is stateless only).",
    )
    card_velocity: CardVelocitySettings = Field(
        CardVelocitySettings(), description="Settings of job card-velocity (only)."
    )
    vehicle_telemetry: VehicleTelemetrySettings = Field(
        VehicleTelemetrySettings(), description="Settings of job vehicle-telemetry (only)."
    )

    @field_validator("starting_offsets")
    @classmethod
    def _offsets_form(cls, value: str) -> str:
        if value in ("earliest", "latest"):
            return value
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            raise ValueError('use earliest, latest, or JSON like {"topic": {"0": 42}}')
        return value

    @model_validator(mode="after")
    def _job_sections(self) -> PipelineConfig:
        if "card_velocity" in self.model_fields_set and self.job != "card-velocity":
            raise ValueError(f"card_velocity configures job card-velocity, not {self.job!r}")
        if "vehicle_telemetry" in self.model_fields_set and self.job != "vehicle-telemetry":
            raise ValueError(
                f"vehicle_telemetry configures job vehicle-telemetry, not {self.job!r}"
            )
        late = self.vehicle_telemetry.late
        if late.mode == "rescore" and duration_ms(late.watermark) <= duration_ms(self.watermark):
            raise ValueError(
                f"vehicle_telemetry.late.watermark ({late.watermark}) must be longer than the "
                f"job's watermark ({self.watermark}) to rescore anything"
            )
        return self
