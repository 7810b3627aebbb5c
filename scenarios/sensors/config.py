"""Knobs of the sensors domain: smart meters and environmental sensors reporting readings."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from core.config.base import Settings
from core.contracts import labels, topics
from simulators.distributions import Distribution, Exponential, Normal, Uniform

SENSOR_FAULTS = labels.SENSOR_FAULTS
FaultType = Literal["stuck_sensor", "spike", "silent_device"]


def _even_mix() -> dict[FaultType, float]:
    return {"stuck_sensor": 0.5, "spike": 0.5}


class SensorFaults(Settings):
    """Injected sensor faults; each incident labels the readings it affects.

    `silent_device` generates no readings while it lasts; it labels the device's first reading
    after it (the one that ends the gap), when the device had reported before it in the run.
    """

    rate_per_hour: float = Field(
        0.0, ge=0, description="Expected faults per sensor-hour (Poisson); 0 turns them off."
    )
    duration_s: Distribution = Field(
        Exponential(mean=120.0), description="Fault length in seconds (negative -> 0)."
    )
    duration_s_by_kind: dict[FaultType, Distribution] = Field(
        default_factory=dict, description="Fault length per fault type, overriding `duration_s`."
    )
    mix: dict[FaultType, float] = Field(
        default_factory=lambda: _even_mix(),
        description="Relative weight of each fault type (`silent_device`: no readings while it "
        "lasts; the reading that ends the gap carries its label).",
    )
    spike_c: float = Field(25.0, description="Degrees added to temperature during a spike.")

    @model_validator(mode="after")
    def _some_weight(self) -> SensorFaults:
        if any(w < 0 for w in self.mix.values()) or sum(self.mix.values()) <= 0:
            raise ValueError("mix weights must be >= 0 with a positive sum")
        return self

    def duration_of(self, kind: str) -> Distribution:
        """The fault length distribution of `kind`: its own, else `duration_s`."""
        return self.duration_s_by_kind.get(kind, self.duration_s)  # type: ignore[call-overload]


class SensorsDomain(Settings):
    """Sensors that report temperature, humidity and battery every few seconds."""

    type: Literal["sensors"] = "sensors"
    topic: str = Field(
        topics.SENSORS_READINGS.name,
        pattern=r"^[a-zA-Z0-9._-]+$",
        description="Kafka topic of readings.",
    )
    id_prefix: str = Field(
        "sf", pattern=r"^[a-z0-9]+$", description="Prefix of event, outage and incident ids."
    )
    interval_s: Distribution = Field(
        Uniform(low=4.0, high=6.0),
        description="Per-sensor reporting interval in seconds, drawn once per sensor.",
    )
    interval_s_by_class: dict[str, Distribution] = Field(
        default_factory=dict, description="Reporting interval per entity class, overriding."
    )
    jitter_s: float = Field(
        0.1, ge=0, description="Each report is early or late by up to this many seconds."
    )
    sites: int = Field(200, ge=1, le=100_000, description="Number of distinct site names.")
    temperature_c: Distribution = Field(
        Normal(mean=21.0, std=3.0), description="Per-sensor baseline temperature."
    )
    daily_amplitude_c: float = Field(4.0, ge=0, description="Day/night temperature swing.")
    noise_c: float = Field(0.3, ge=0, description="Std of temperature noise per reading.")
    humidity_pct: Distribution = Field(
        Normal(mean=45.0, std=10.0), description="Per-sensor baseline relative humidity."
    )
    battery_v: Distribution = Field(
        Uniform(low=3.5, high=4.2), description="Per-sensor battery voltage at start."
    )
    battery_drain_v_per_day: float = Field(0.02, ge=0, description="Battery voltage lost per day.")
    low_battery_v: float = Field(3.4, description="Below this the status is 'low_battery'.")
    faults: SensorFaults = Field(default_factory=SensorFaults, description="Injected faults.")
