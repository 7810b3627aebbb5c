"""Response schemas of the sensor read routes (`api.panel.routes.sensors`)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from api.panel.models.clock import ClockOffset
from api.panel.models.feeds import AlertRow, Source


class SensorReading(BaseModel):
    """One `sensor.reading/1` as kept."""

    event_time: int = Field(description="Device clock, epoch ms.")
    seq: int = Field(description="The device's sequence number.")
    temperature_c: float | None
    humidity_pct: float | None
    battery_v: float | None


class SensorRow(BaseModel):
    sensor_id: str
    site: str
    x: float = Field(description="The site's place on the site map, 0-100 (from its name).")
    y: float
    status: str | None = Field(description="ok or low_battery, as the device reports it.")
    alerts: int = Field(description="Its alerts among the run's shown.")
    last: SensorReading = Field(description="The newest reading by event time.")
    offset_estimate_ms: int | None = Field(
        None,
        description="Its clock's estimated offset (`sensors.clock-offsets`); null: none yet.",
    )


class SiteRow(BaseModel):
    site: str
    x: float
    y: float
    devices: int
    alerts: int


class RunRow(BaseModel):
    run: str = Field(description="The event ids' `<prefix>-<run>` part.")
    devices: int


class SensorFeedSource(BaseModel):
    """How the sensor feed is doing: the tail's read budget and skips, the view's bounds."""

    topic: str
    partitions: int
    error: str | None
    read_cap_per_s: int
    records_read: int
    records_skipped: int
    skips: int
    last_skip_at: int | None
    devices: int
    max_devices: int
    history_len: int
    readings: int
    malformed: int
    evicted: int


class SensorList(BaseModel):
    run: str | None = Field(description="The run shown: the one asked for, else the newest.")
    runs: list[RunRow] = Field(description="Runs kept, newest first.")
    devices: list[SensorRow] = Field(description="By sensor id.")
    count: int
    matched: int = Field(description="The run's devices kept (before `limit`).")
    sites: list[SiteRow]
    source: SensorFeedSource


class SensorSeries(BaseModel):
    run: str | None
    sensor_id: str
    site: str
    status: str | None
    readings: list[SensorReading] = Field(description="Newest kept, oldest first.")
    alerts: list[AlertRow] = Field(description="Its alerts, newest detection first.")
    clock: ClockOffset | None = Field(
        None, description="Its estimated clock offset (`sensors.clock-offsets`); null: none."
    )


class SensorAlerts(BaseModel):
    run: str | None
    alerts: list[AlertRow] = Field(description="Newest detection first.")
    count: int
    source: Source
