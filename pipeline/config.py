"""Pipeline settings (kind: pipeline): inputs, watermark, windows, trigger, outputs."""

from __future__ import annotations

import json
from typing import Annotated, Literal

from pydantic import Field, field_validator

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
    trigger: TriggerSettings = TriggerSettings()

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
