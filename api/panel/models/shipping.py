"""Response schemas of the owner-scoped shipping routes (`api.panel.routes.shipping`)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class Reading(BaseModel):
    """A container reading (`shipping.container/1`) as kept."""

    event_id: str
    seq: int
    event_time: int = Field(description="Device clock, epoch ms.")
    emitted_at: int | None = Field(
        description="Emit time (the Kafka record's CreateTime, simulated), epoch ms: days after "
        "the event time for a reading held on board until port."
    )
    ship_id: str | None
    voyage_id: int | None
    port: str | None = Field(description="UN/LOCODE while in port.")
    temp_c: float | None
    setpoint_c: float | None
    power_kw: float | None
    door_open: bool | None
    shock_g: float | None
    alarm: str | None
    channel: str | None = Field(description="onboard (held until port), satellite or shore.")


class Leg(BaseModel):
    """A container's time on one ship's voyage leg: its history across ships is the legs."""

    ship_id: str
    voyage_id: int | None
    first_event_time: int | None
    last_event_time: int | None
    readings: int
    door_opens_at_sea: int
    alarms: int
    loaded_at: str | None
    unloaded_at: str | None


class PortEvent(BaseModel):
    event_id: str
    event: str = Field(description="loaded or unloaded.")
    event_time: int
    port: str | None
    ship_id: str | None
    voyage_id: int | None


class ContainerRow(BaseModel):
    container_id: str
    owner: str
    cargo: str | None
    reefer: bool | None
    discharge_port: str | None
    final_port: str | None
    legs_count: int
    last_reading: Reading | None


class ContainerHistory(ContainerRow):
    legs: list[Leg] = Field(description="By first event time: the ship's log of the box.")
    readings: list[Reading] = Field(description="The newest readings kept, oldest first.")
    port_events: list[PortEvent]


class ShippingSource(BaseModel):
    """How the shipping feed is doing: `lag` > 0 while a flushed voyage is still being read."""

    topics: list[str]
    partitions: int
    records_read: int
    lag: int
    lag_as_of: int | None = Field(
        description="Wall-clock ms before the end offsets `lag` counts to were read: records "
        "written later may be unread at lag 0. None until they were read once."
    )
    read_cap_per_s: int
    error: str | None
    containers: int
    max_containers: int
    readings: int
    duplicates: int
    malformed: int
    owner_conflicts: int
    evicted: int


class ContainerList(BaseModel):
    owner: str
    containers: list[ContainerRow]
    count: int
    matched: int = Field(description="The owner's containers matching the filters.")
    source: ShippingSource
