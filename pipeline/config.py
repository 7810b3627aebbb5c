"""A pipeline config file: the job it configures, its topics, watermark and trigger."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from core.config.base import Settings
from core.contracts import topics
from pipeline.jobs.card_velocity.config import CardVelocitySettings
from pipeline.jobs.shipping.config import ShippingSettings, offsets_by_topic, topics_by_kind
from pipeline.jobs.vehicle_telemetry.config import VehicleTelemetrySettings
from pipeline.jobs.window_counts.config import WindowCountsSettings
from pipeline.settings import Duration, TriggerSettings, duration_ms, offsets_form


class PipelineConfig(Settings):
    kind: Literal["pipeline"] = "pipeline"
    job: str = Field(description="Which job this configures, e.g. window-counts.")
    input_topics: list[str] = Field(min_length=1, description="Kafka topics to read.")
    output_topic: str = Field(description="Kafka topic for the job's results.")
    deadletter_topic: str = Field(topics.DEADLETTER.name, description="Where malformed records go.")
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
    window_counts: WindowCountsSettings = Field(
        WindowCountsSettings(), description="Settings of job window-counts (only)."
    )
    card_velocity: CardVelocitySettings = Field(
        CardVelocitySettings(), description="Settings of job card-velocity (only)."
    )
    vehicle_telemetry: VehicleTelemetrySettings = Field(
        VehicleTelemetrySettings(), description="Settings of job vehicle-telemetry (only)."
    )
    shipping: ShippingSettings = Field(
        ShippingSettings(), description="Settings of job shipping (only)."
    )

    @field_validator("starting_offsets")
    @classmethod
    def _offsets_form(cls, value: str) -> str:
        return offsets_form(value)

    @model_validator(mode="after")
    def _job_sections(self) -> PipelineConfig:
        if "window_counts" in self.model_fields_set and self.job != "window-counts":
            raise ValueError(f"window_counts configures job window-counts, not {self.job!r}")
        if "card_velocity" in self.model_fields_set and self.job != "card-velocity":
            raise ValueError(f"card_velocity configures job card-velocity, not {self.job!r}")
        if "vehicle_telemetry" in self.model_fields_set and self.job != "vehicle-telemetry":
            raise ValueError(
                f"vehicle_telemetry configures job vehicle-telemetry, not {self.job!r}"
            )
        if "shipping" in self.model_fields_set and self.job != "shipping":
            raise ValueError(f"shipping configures job shipping, not {self.job!r}")
        if self.job == "shipping":
            topics_by_kind(self.input_topics)
            offsets_by_topic(self.starting_offsets, self.input_topics)
        late = self.vehicle_telemetry.late
        if late.mode == "rescore" and duration_ms(late.watermark) <= duration_ms(self.watermark):
            raise ValueError(
                f"vehicle_telemetry.late.watermark ({late.watermark}) must be longer than the "
                f"job's watermark ({self.watermark}) to rescore anything"
            )
        return self
