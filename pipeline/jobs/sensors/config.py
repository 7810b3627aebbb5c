"""Settings of job `sensors`."""

from __future__ import annotations

from pydantic import Field

from core.config.base import Settings
from core.contracts import topics
from pipeline.settings import Duration


class SensorsSettings(Settings):
    """Job `sensors`: the counts always; the sensors alerts when `sensor_alerts`.

    The alerts query reads `sensor.reading/1` fields (temperature, humidity, status) keyed by
    the job's `entity_key`, and runs the rules of `pipeline.jobs.sensors.rules`.
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
