"""Settings of job `sensors`."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from core.config.base import Settings
from core.contracts import topics
from pipeline.settings import Duration, duration_ms
from pipeline.sketch_settings import SketchSettings


class SensorsSettings(Settings):
    """Job `sensors`: the counts always; the sensors alerts when `sensor_alerts`.

    The alerts query reads `sensor.reading/1` fields (temperature, humidity, status) keyed by
    the job's `entity_key`, and runs the rules of `pipeline.jobs.sensors.rules`, in the form
    `rules_form` names.
    """

    sensor_alerts: bool = Field(
        False,
        description="Also run the sensors rules (stuck sensor, spike, low battery) per "
        "entity and publish their alerts to `alerts_topic` (the input must be sensor readings).",
    )
    alerts_topic: str = Field(topics.ALERTS.name, description="Kafka topic for the alerts.")
    sensor_state_ttl: Duration | None = Field(
        "1 day",
        description="Forget a sensor's rule states once the watermark is this far past its "
        "latest reading (event time); unset: keep them forever.",
    )
    max_buffered: int = Field(
        10_000, ge=1, description="Readings a sensor may hold for the watermark (oldest go first)."
    )
    rules_form: Literal["python", "engine"] = Field(
        "engine",
        description="python: per-event rule states per sensor (`applyInPandasWithState`; "
        "about 2.5 ms per sensor per batch: it falls behind a fleet of 20,000); "
        "engine: Column expressions over each sensor's readings per sliding event-time window "
        "(`pipeline.jobs.sensors.engine`); judges only what a window holds whole (see "
        "`pipeline.rules`); silence, which no window holds, in Python state per bucket of "
        "sensors (`pipeline.jobs.sensors.silence`).",
    )
    rules_window: Duration = Field(
        "4 minutes",
        description="engine form: the sliding window's length; a pair or run spanning more "
        "than `rules_window - rules_slide` may go unjudged.",
    )
    rules_slide: Duration = Field(
        "1 minute",
        description="engine form: the sliding window's step (alerts wait up to one step plus "
        "the watermark; each reading is in `rules_window / rules_slide` windows).",
    )
    state_buckets: int = Field(
        8,
        ge=1,
        le=10_000,
        description="Buckets of sensors the rules' Python state is kept in (its grouping key; "
        "engine form: the silence rule's, python form: every rule's): each costs one state "
        "read and write per batch, however many sensors it holds. Part of the checkpoint: "
        "change it only with a fresh checkpoint.",
    )

    sketches: SketchSettings = Field(
        SketchSettings(),
        description="`sensors.sketches`: per window the noisiest devices (Count-Min) and the "
        "distinct devices per site (HyperLogLog), to `aggregates.heavy-hitters` and "
        "`aggregates.distinct-counts` (`pipeline.jobs.sensors.sketches`).",
    )

    @model_validator(mode="after")
    def _slide_within_window(self) -> SensorsSettings:
        if duration_ms(self.rules_slide) >= duration_ms(self.rules_window):
            raise ValueError("rules_slide must be shorter than rules_window")
        return self
