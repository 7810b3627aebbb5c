"""The engine's knobs: device clocks, delivery, pacing. Scenarios compose these into their config.

Times are in seconds here (people write seconds); the engine works in epoch milliseconds.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Annotated, Literal, Protocol

from pydantic import BeforeValidator, Field, field_validator

from core.config.base import Settings
from simulators.distributions import Constant, Distribution, Exponential, LogNormal, Normal
from simulators.tagged import require_tag, untagged

Probability = Annotated[float, Field(ge=0.0, le=1.0)]


def _aware(value: datetime) -> datetime:
    if value.tzinfo is None:
        raise ValueError("must include a timezone, e.g. 2026-01-01T00:00:00Z")
    return value.astimezone(UTC)


class ClockJumps(Settings):
    """Step changes of a device clock, e.g. NTP corrections."""

    probability: Probability = Field(0.0, description="Chance per reading that the clock steps.")
    size_s: Distribution = Field(
        Normal(mean=0.0, std=2.0), description="Step size in seconds (signed)."
    )


class ClockResets(Settings):
    """A device clock that restarts from a fixed epoch (RTC battery loss) until it resyncs."""

    probability: Probability = Field(0.0, description="Chance per reading that the clock resets.")
    epoch: datetime = Field(
        datetime(2000, 1, 1, tzinfo=UTC), description="What a reset clock reads at the reset."
    )
    duration_s: Distribution = Field(
        Exponential(mean=300.0), description="Seconds until the clock resyncs (negative -> 0)."
    )

    _aware_epoch = field_validator("epoch")(_aware)


class ClockSettings(Settings):
    """Each device stamps event_time with its own clock: offset + drift + jumps + resets."""

    offset_s: Distribution = Field(
        Normal(mean=0.0, std=0.5), description="Per-device clock offset at start, seconds."
    )
    drift_ppm: Distribution = Field(
        Normal(mean=0.0, std=20.0), description="Per-device drift, parts per million of elapsed."
    )
    jumps: ClockJumps = Field(default_factory=ClockJumps, description="Occasional clock steps.")
    resets: ClockResets = Field(
        default_factory=ClockResets, description="Occasional resets to a fixed epoch."
    )


class Outages(Settings):
    """Connectivity loss with store-and-forward: readings wait, then flush on reconnect."""

    rate_per_hour: float = Field(
        0.0, ge=0, description="Expected outages per device-hour (Poisson); 0 turns them off."
    )
    duration_s: Distribution = Field(
        Exponential(mean=60.0), description="Outage length in seconds (negative -> 0)."
    )
    buffer_cap: int = Field(
        1000, ge=0, description="Readings a device can hold during an outage; 0 holds none."
    )
    drop_policy: Literal["drop_oldest", "drop_newest"] = Field(
        "drop_oldest", description="What a full buffer drops: its oldest or the new reading."
    )
    flush: Literal["in_order", "shuffled"] = Field(
        "in_order", description="Order of the backlog sent on reconnect."
    )
    flush_rate: float = Field(
        1000.0, gt=0, description="Backlog readings sent per second after reconnect."
    )
    flush_duplicates: Probability = Field(
        0.0,
        description="Chance a backlog reading is sent twice on reconnect (its acknowledgement "
        "was lost); the copy follows after a retry delay.",
    )


class Duplicates(Settings):
    """At-least-once delivery: an identical re-send of a delivered event."""

    probability: Probability = Field(0.0, description="Chance a delivered event is sent again.")
    retry_delay_s: Distribution = Field(
        LogNormal(median=2.0, sigma=0.5),
        description="Seconds between the send and its retry (clipped to 0..max_delay_s).",
    )


class Drops(Settings):
    """At-most-once delivery: an event lost in transmission, never retried."""

    probability: Probability = Field(0.0, description="Chance an event is lost in transit.")


class DeliverySettings(Settings):
    """What happens between true time and emit time."""

    delay_s: Distribution = Field(
        LogNormal(median=0.08, sigma=0.6),
        description="Per-event network delay in seconds (clipped to 0..max_delay_s).",
    )
    max_delay_s: float = Field(
        30.0, gt=0, description="Cap on network and retry delays; it bounds the pending buffer."
    )
    outages: Outages = Field(default_factory=Outages, description="Connectivity outages.")
    duplicates: Duplicates = Field(default_factory=Duplicates, description="Retried sends.")
    drops: Drops = Field(default_factory=Drops, description="Lost sends.")


class ConstantRate(Settings):
    type: Literal["constant"] = "constant"
    rate: float = Field(10_000.0, gt=0, description="Events per wall second.")

    def at(self, t: float) -> float:
        return self.rate


class RampRate(Settings):
    type: Literal["ramp"] = "ramp"
    from_rate: float = Field(1_000.0, gt=0, description="Events/s at the start.")
    to_rate: float = Field(10_000.0, gt=0, description="Events/s at the end of the ramp and after.")
    over_s: float = Field(60.0, gt=0, description="Ramp length in wall seconds.")

    def at(self, t: float) -> float:
        return self.from_rate + (self.to_rate - self.from_rate) * min(max(t / self.over_s, 0), 1)


class SineRate(Settings):
    type: Literal["sine"] = "sine"
    rate: float = Field(10_000.0, gt=0, description="Mean events/s.")
    amplitude: float = Field(5_000.0, ge=0, description="Swing around the mean, events/s.")
    period_s: float = Field(60.0, gt=0, description="Period in wall seconds.")

    def at(self, t: float) -> float:
        return max(self.rate + self.amplitude * math.sin(2 * math.pi * t / self.period_s), 1.0)


class SpikeRate(Settings):
    type: Literal["spike"] = "spike"
    rate: float = Field(5_000.0, gt=0, description="Events/s outside the spike.")
    spike_rate: float = Field(50_000.0, gt=0, description="Events/s during the spike.")
    at_s: float = Field(30.0, ge=0, description="Spike start, wall seconds after the run starts.")
    for_s: float = Field(10.0, gt=0, description="Spike length in wall seconds.")

    def at(self, t: float) -> float:
        return self.spike_rate if self.at_s <= t < self.at_s + self.for_s else self.rate


_SHAPES = ("constant", "ramp", "sine", "spike")

RateShape = Annotated[
    ConstantRate | RampRate | SineRate | SpikeRate,
    Field(discriminator="type"),
    untagged(_SHAPES),
    BeforeValidator(require_tag(_SHAPES)),
]


class PacingSettings(Settings):
    """Maps simulated time to wall time. Never changes the stream's content."""

    speed: float | Literal["max"] = Field(
        1.0, description="Simulated seconds per wall second, or 'max' for as fast as possible."
    )
    max_rate: float | None = Field(
        None, gt=0, description="Global cap on emitted events per wall second; unset: no cap."
    )
    shape: RateShape | None = Field(
        None, description="A rate limit that varies with wall time (constant, ramp, sine, spike)."
    )

    @field_validator("speed")
    @classmethod
    def _positive(cls, value: float | str) -> float | str:
        if isinstance(value, float | int) and value <= 0:
            raise ValueError("speed must be > 0, or 'max'")
        return value


class EntityClass(Settings):
    """A share of the entities with its own clock and delivery settings.

    `clock` and `delivery` given here are merged key by key over the scenario's top-level ones.
    """

    name: str = Field(
        "default", pattern=r"^[a-z][a-z0-9_]*$", description="Class name (snake_case)."
    )
    share: float = Field(1.0, gt=0, description="Relative weight; shares are normalised.")
    clock: ClockSettings = Field(default_factory=ClockSettings, description="Device clocks.")
    delivery: DeliverySettings = Field(
        default_factory=DeliverySettings, description="Delivery model."
    )


DEFAULT_START = datetime(2026, 1, 1, tzinfo=UTC)


class RunSettings(Protocol):
    """The run settings the engine reads: a scenario file's common knobs (the scenario catalog's
    `ScenarioConfig` has them; its domain section is the scenario's, not the engine's)."""

    @property
    def name(self) -> str: ...  # truth goes to truth.<name>
    @property
    def seed(self) -> int: ...
    @property
    def run_id(self) -> str | None: ...
    @property
    def duration_s(self) -> float: ...
    @property
    def tick_s(self) -> float: ...
    @property
    def classes(self) -> list[EntityClass]: ...
    @property
    def pacing(self) -> PacingSettings: ...
    @property
    def start_ms(self) -> int: ...
    def class_counts(self) -> list[int]: ...


__all__ = [
    "DEFAULT_START",
    "ClockSettings",
    "Constant",
    "DeliverySettings",
    "EntityClass",
    "PacingSettings",
    "RateShape",
    "RunSettings",
]
