"""A pipeline config file: the job it configures, its topics, watermark and trigger."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from core.config.base import Settings
from core.contracts import topics
from core.names import DOMAINS, canonical, canonical_keys
from pipeline.clock_settings import ClockSettings
from pipeline.jobs.cards.config import CardsSettings
from pipeline.jobs.sensors.config import SensorsSettings
from pipeline.jobs.shipping.config import ShippingSettings, offsets_by_topic, topics_by_kind
from pipeline.jobs.vehicles.config import VehiclesSettings
from pipeline.settings import Duration, TriggerSettings, duration_ms, offsets_form


class PipelineConfig(Settings):
    kind: Literal["pipeline"] = "pipeline"
    job: str = Field(description="Which job this configures, e.g. sensors.")
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
    clock: ClockSettings = Field(
        ClockSettings(),
        description="Which time the job windows on: the device's (event_time, the default) or "
        "corrected for its estimated clock offset (corrected_event_time; sensors, vehicles).",
    )
    sensors: SensorsSettings = Field(
        SensorsSettings(), description="Settings of job sensors (only)."
    )
    cards: CardsSettings = Field(CardsSettings(), description="Settings of job cards (only).")
    vehicles: VehiclesSettings = Field(
        VehiclesSettings(), description="Settings of job vehicles (only)."
    )
    shipping: ShippingSettings = Field(
        ShippingSettings(), description="Settings of job shipping (only)."
    )

    @field_validator("starting_offsets")
    @classmethod
    def _offsets_form(cls, value: str) -> str:
        return offsets_form(value)

    @model_validator(mode="before")
    @classmethod
    def _retired_names(cls, data: Any) -> Any:
        """A settings file written before 0.2: its job and section names (`core.names`)."""
        data = canonical_keys(data)
        if isinstance(data, dict) and isinstance(data.get("job"), str):
            data = {**data, "job": canonical(data["job"])}
        return data

    @model_validator(mode="after")
    def _job_sections(self) -> PipelineConfig:
        for section in DOMAINS:  # each job's section is named as the job
            if section in self.model_fields_set and self.job != section:
                raise ValueError(f"{section} configures job {section}, not {self.job!r}")
        if self.job == "shipping":
            topics_by_kind(self.input_topics)
            offsets_by_topic(self.starting_offsets, self.input_topics)
        late = self.vehicles.late
        if late.mode == "rescore" and duration_ms(late.watermark) <= duration_ms(self.watermark):
            raise ValueError(
                f"vehicles.late.watermark ({late.watermark}) must be longer than the "
                f"job's watermark ({self.watermark}) to rescore anything"
            )
        return self
