"""Pipeline settings (kind: pipeline): inputs, watermark, windows, trigger, outputs."""

from __future__ import annotations

import json
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from detectors import SpendingParams, TerminalParams, TravelParams, VelocityParams
from streamsim.config.base import Settings

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
    velocity and terminal rules run on tumbling windows of their own `window_s`.
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
        return self
