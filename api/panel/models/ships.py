"""Response schemas of the Shipping page's open routes (`api.panel.routes.ships`)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from api.panel.models.shipping import ShippingSource


class Position(BaseModel):
    event_time: int
    lat: float
    lon: float
    sog_kn: float | None
    cog_deg: float | None
    nav_status: str | None
    dest_port: str | None
    voyage_id: int | None
    channel: str | None


class ShipRow(BaseModel):
    ship_id: str
    status: str = Field(description="in_port, at_sea or unknown.")
    position: Position | None = Field(description="The newest by event time.")
    track: list[list[float]] = Field(description="[lon, lat] by event time: the lane sailed.")
    lane: list[list[float]] = Field(
        description="[lon, lat]: the sea lane (searoute) from its port to its destination."
    )
    port: str | None = Field(description="Of its newest arrival or departure.")
    arrived_at: int | None
    departed_at: int | None
    boxes_aboard: int
    satellite_alarms: int = Field(description="Container alarms sent live by satellite.")
    onboard_records: int = Field(description="Records logged on board, held until port.")
    held_now: int = Field(description="Onboard records known held at `shore_now`.")
    peak_held: int
    mean_delay_h: float | None = Field(description="Mean hours from logging to upload.")
    last_upload: int | None
    waiting_est: int | None = Field(
        description="At sea: records waiting on board now, estimated from its onboard rate."
    )


class PortRow(BaseModel):
    port: str = Field(description="UN/LOCODE.")
    name: str | None
    lat: float | None
    lon: float | None
    ships_in_dock: list[str]


class BacklogPoint(BaseModel):
    ship_id: str
    time: int = Field(description="Hour start, epoch ms (the run's clock).")
    held: int


class RunRow(BaseModel):
    run: str
    ships: int


class Fleet(BaseModel):
    run: str | None = Field(description="The run shown (event ids' `sh-<run>` part).")
    runs: list[RunRow] = Field(description="Runs read, newest first.")
    shore_now: int | None = Field(description="The newest emit time seen: the run's clock.")
    ships: list[ShipRow]
    ports: list[PortRow]
    backlog: list[BacklogPoint]
    source: ShippingSource
    fleet: dict[str, int]


class ShippingAlerts(BaseModel):
    alerts: list[dict[str, Any]] = Field(description="Shipping alerts, newest first.")
    count: int
    source: dict[str, Any]
