"""Response schemas of the vehicle read routes (`api.panel.routes.vehicles`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from api.panel.models.clock import ClockOffset
from api.panel.models.feeds import AlertRow, Source
from live.views.vehicles import SIGNALS

Signal = Literal[SIGNALS]  # type: ignore[valid-type]
Status = Literal["alerting", "moving", "parked"]


class VehicleRow(BaseModel):
    """A vehicle's latest reading (`vehicle.telemetry/1`), its status and its last alert."""

    vehicle_id: str
    status: Status = Field(
        description="alerting: an alert about it detected in the last `alerting_for_s`; "
        "parked: nothing from it for `parked_after_s` (parked vehicles send nothing; tunnels "
        "and dead zones hold readings back too); moving: reporting."
    )
    seq: int | None = Field(None, description="The device's sequence number of this reading.")
    event_time: int | None = Field(None, description="Device clock, epoch ms.")
    emitted_at: int | None = Field(
        None, description="Emit time (the Kafka record's CreateTime, simulated), epoch ms."
    )
    received_at: int | None = Field(
        None, description="Processing time: when the API read it, epoch ms."
    )
    silent_s: float | None = Field(None, description="Seconds since the API read anything of it.")
    trip_id: int | None = None
    road_class: str | None = Field(None, description="motorway, rural or urban.")
    speed_limit_kmh: float | None = None
    speed_kmh: float | None = None
    heading_deg: float | None = None
    accel_long_ms2: float | None = None
    coolant_c: float | None = None
    battery_v: float | None = None
    fuel_pct: float | None = None
    tyre_min_kpa: float | None = Field(None, description="The lowest of the four tyres.")
    lat: float | None = Field(None, description="The last GPS fix (kept through tunnels).")
    lon: float | None = None
    gps_fix: bool | None = Field(None, description="False when this reading had no fix.")
    fix_event_time: int | None = Field(None, description="Device clock of the last fix.")
    last_alert: AlertRow | None
    alerts: int = Field(description="Alerts kept for it (the most recent ones).")
    history: int = Field(description="Recent readings kept for it (0: not tracked).")
    offset_estimate_ms: int | None = Field(
        None,
        description="Its clock's estimated offset (`vehicles.clock-offsets`); null: none yet.",
    )


class Sampling(BaseModel):
    """How much of the topic the feed reads (it skips ahead when the topic runs faster)."""

    read_cap_per_s: int = Field(description="At most this many records/s are read.")
    records_read: int
    records_skipped: int = Field(description="Jumped over to stay near the topic's end.")
    skips: int
    last_skip_at: int | None = Field(description="Epoch ms of the latest jump ahead.")
    readings: int = Field(description="Records taken as a vehicle's latest reading.")
    stale: int = Field(description="Duplicates and stragglers (seq not newer): ignored.")
    malformed: int


class Bounds(BaseModel):
    vehicles: int = Field(description="Vehicles with a latest reading in memory.")
    max_vehicles: int
    with_history: int
    history_vehicles: int = Field(description="At most this many vehicles keep a history.")
    history_len: int = Field(description="Readings kept per tracked vehicle.")
    pinned: int = Field(description="Vehicles kept tracked: alerted or asked for.")
    history_bytes: int


class VehicleList(BaseModel):
    vehicles: list[VehicleRow] = Field(
        description="Alerting first, then moving, then parked; by id within."
    )
    count: int
    counts: dict[Status, int] = Field(description="Vehicles per status, before `limit`.")
    bounds: Bounds
    sampling: Sampling
    source: Source


class TelemetryReading(BaseModel):
    model_config = ConfigDict(extra="allow")

    event_time: int = Field(description="Device clock, epoch ms.")
    seq: int
    received_at: int = Field(description="Processing time, epoch ms.")


class VehicleTelemetry(BaseModel):
    vehicle_id: str
    vehicle: VehicleRow
    signals: list[Signal] = Field(description="The signals each reading carries (null: none).")
    readings: list[TelemetryReading] = Field(
        description="Recent readings, oldest first by seq (sampled when the topic runs faster "
        "than the feed's read cap)."
    )
    alerts: list[AlertRow] = Field(description="Its recent alerts, newest first.")
    tracked: bool = Field(
        description="Whether its history is kept; asking for it starts tracking it."
    )
    clock: ClockOffset | None = Field(
        None, description="Its estimated clock offset (`vehicles.clock-offsets`); null: none."
    )
    history_len: int
