"""Knobs of the container-shipping domain (Dunning & Friedman ch. 7): ships on real sea lanes
between real ports, IoT containers on board, a port-triggered store-and-forward uplink.

Every range below is a documented realistic range, drawn from per run, per ship, per container
or per leg; none of them ends at a detector's threshold. Sources for the defaults: container
ship service speeds 14-22 knots (slow steaming to design speed); berth dwell 12-48 h; reefer
logger intervals 15-60 min; reefer defrost every 6-12 h for 20-45 min with a 1.5-5 C rise of
return air; reefer power 3-7.5 kW cycling; uplink in port within 10-60 min of berthing.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from core.config.base import Settings
from core.contracts.labels import SHIPPING_FAULTS
from core.contracts.topics import SHIPPING_CONTAINERS, SHIPPING_PORT_EVENTS, SHIPPING_POSITIONS
from simulators.distributions import Distribution, LogNormal, Uniform

# Order matters: a label's index is its position + 1 (0 is "none").
SHIPPING_INCIDENTS = SHIPPING_FAULTS
# Situations that look like an incident but are not (truth `hard_negative`).
HARD_NEGATIVES = ("defrost", "door_in_port", "transshipment", "weather_routing", "port_handling")
LOCODE = r"^[A-Z]{2}[A-Z2-9]{3}$"


class Service(Settings):
    """A liner service: a loop of port calls that its ships sail round and round."""

    name: str = Field(..., pattern=r"^[a-z][a-z0-9_]*$", description="Service name.")
    rotation: list[str] = Field(
        ..., min_length=2, description="UN/LOCODEs of the calls in order; the loop closes."
    )

    @field_validator("rotation")
    @classmethod
    def _codes(cls, rotation: list[str]) -> list[str]:
        import re

        bad = [c for c in rotation if not re.match(LOCODE, c)]
        if bad:
            raise ValueError(f"not UN/LOCODEs: {bad} (5 characters, e.g. SGSIN)")
        same = [a for a, b in zip(rotation, rotation[1:] + rotation[:1], strict=True) if a == b]
        if same:
            raise ValueError(f"consecutive calls at the same port: {same}")
        return rotation


def _default_services() -> list[Service]:
    return [
        Service(  # Asia - North Europe via Suez
            name="asia_europe",
            rotation=[
                "CNSHA",
                "CNYTN",
                "SGSIN",
                "LKCMB",
                "EGPSD",
                "ESALG",
                "NLRTM",
                "DEHAM",
                "GBFXT",
                "ESALG",
                "EGPSD",
                "AEJEA",
                "LKCMB",
                "SGSIN",
            ],
        ),
        Service(  # the chapter's Tokyo - Singapore - Sydney
            name="asia_oceania",
            rotation=["JPTYO", "KRPUS", "HKHKG", "SGSIN", "AUSYD", "AUMEL", "SGSIN", "HKHKG"],
        ),
        Service(  # intra-Asia feeder loop
            name="intra_asia",
            rotation=["SGSIN", "MYPKG", "HKHKG", "TWKHH", "CNSHA", "KRPUS", "JPYOK", "CNNGB"],
        ),
    ]


class Voyages(Settings):
    speed_kn: Distribution = Field(
        Uniform(low=14.0, high=22.0), description="Service speed per ship and leg, knots."
    )
    speed_noise_kn: float = Field(0.4, ge=0, description="Std of speed over ground noise.")
    dwell_h: Distribution = Field(
        LogNormal(median=22.0, sigma=0.35), description="Hours alongside per call (12-48 h)."
    )
    uplink_min: Distribution = Field(
        Uniform(low=10.0, high=60.0),
        description="Minutes from berthing to the ship-to-shore link: the backlog flushes then.",
    )
    position_interval_s: float = Field(600.0, ge=60, description="Onboard position log period.")
    load_factor: Distribution = Field(
        Uniform(low=0.7, high=0.95), description="Share of a ship's IoT slots filled per call."
    )
    transship_share: float = Field(
        0.25, ge=0, le=1, description="Share of bookings to a port off the ship's loop (via a hub)."
    )


class Satellite(Settings):
    """The expensive live channel: a thin slice at sea (positions every few hours, alarms)."""

    enabled: bool = Field(True, description="Send the slice live; off: everything waits.")
    position_every_h: float = Field(4.0, gt=0, description="Hours between live positions.")
    alarms: bool = Field(True, description="Container alarms (temperature, door, shock) live.")
    delay_s: Distribution = Field(
        Uniform(low=2.0, high=30.0), description="Extra latency of the satellite hop, seconds."
    )


class Containers(Settings):
    reefer_share: float = Field(0.3, ge=0, le=1, description="Share of reefers.")
    reefer_interval_s: float = Field(900.0, ge=60, description="Reefer logger period.")
    dry_interval_s: float = Field(3600.0, ge=60, description="Dry-box tracker period.")
    temp_noise_c: float = Field(0.25, ge=0, description="Std of supply-air noise.")
    power_kw: Distribution = Field(
        Uniform(low=3.0, high=7.5), description="Mean cycling draw per reefer unit, kW."
    )
    defrost_every_h: Distribution = Field(
        Uniform(low=6.0, high=12.0), description="Defrost period per unit, hours."
    )
    defrost_min: Distribution = Field(
        Uniform(low=20.0, high=45.0), description="Defrost length per unit, minutes."
    )
    defrost_rise_c: Distribution = Field(
        Uniform(low=1.5, high=5.0), description="Peak rise of air temperature in a defrost."
    )
    alarm_band_c: float = Field(
        5.0,
        gt=0,
        description="The controller's own alarm: |temp - setpoint| beyond this "
        "(outside defrost) raises a temperature alarm.",
    )
    shock_alarm_g: float = Field(5.0, gt=0, description="The tracker's shock alarm level, g.")
    handling_shock_g: Distribution = Field(
        Uniform(low=1.2, high=4.0), description="Peak shock of a crane move, g."
    )
    sea_shock_g: Distribution = Field(
        LogNormal(median=0.35, sigma=0.5), description="Peak shock per reading at sea, g."
    )
    turnaround_d: Distribution = Field(
        Uniform(low=2.0, high=7.0), description="Days a delivered box is away (no readings)."
    )
    port_inspection: float = Field(
        0.04, ge=0, le=1, description="Chance per port stay that a box is opened (customs)."
    )
    inspection_min: Distribution = Field(
        Uniform(low=15.0, high=120.0), description="Minutes a box stays open in port."
    )


class Incidents(Settings):
    """Injected incidents (labels in truth.shipping); chances per container or ship and leg.

    Far above real-world rates (a few hundred boxes are lost a year across the world fleet), so
    that a run of a few simulated weeks holds enough of each type to score detectors on."""

    reefer_failure: float = Field(0.01, ge=0, le=1, description="Per reefer and leg.")
    failure_tau_h: Distribution = Field(
        Uniform(low=24.0, high=72.0),
        description="Time constant of the drift from setpoint to ambient after a failure.",
    )
    fan_kw: Distribution = Field(
        Uniform(low=0.5, high=1.2), description="Draw of a failed unit (fans only), kW."
    )
    lost_overboard: float = Field(0.1, ge=0, le=1, description="Per ship and leg: a stack loss.")
    boxes_lost: tuple[int, int] = Field((1, 6), description="Boxes lost in one stack loss.")
    overboard_shock_g: Distribution = Field(
        Uniform(low=8.0, high=30.0), description="Last shock reading of a lost box, g."
    )
    door_tamper: float = Field(0.004, ge=0, le=1, description="Per container and leg.")
    tamper_min: Distribution = Field(
        Uniform(low=5.0, high=40.0), description="Minutes a door stays open at sea."
    )
    missed_unload: float = Field(0.01, ge=0, le=1, description="Per box due off at a call.")
    route_deviation: float = Field(0.1, ge=0, le=1, description="Per ship and leg.")
    deviation_nm: Distribution = Field(
        Uniform(low=25.0, high=120.0), description="How far off the lane, nautical miles."
    )
    loiter_h: Distribution = Field(
        Uniform(low=4.0, high=24.0), description="Hours drifting at the off-lane point."
    )
    weather_routing: float = Field(0.15, ge=0, le=1, description="Per leg: a planned detour.")
    detour_nm: Distribution = Field(
        Uniform(low=30.0, high=200.0), description="Widest point of a weather detour, nm."
    )
    min_leg_h: float = Field(36.0, ge=0, description="Legs shorter than this get no incident.")


class ShippingDomain(Settings):
    """Ships, containers and ports; classes must be named ship, container and port."""

    type: Literal["shipping"] = "shipping"
    id_prefix: str = Field("sh", pattern=r"^[a-z0-9]+$", description="Prefix of ids.")
    services: list[Service] = Field(default_factory=_default_services, min_length=1)
    hubs: list[str] = Field(
        default_factory=lambda: ["SGSIN", "HKHKG", "LKCMB", "ESALG", "KRPUS"],
        description="Transshipment hubs (UN/LOCODEs on some service).",
    )
    capacity: int = Field(500, ge=1, description="IoT container slots per ship.")
    owners: dict[str, str] = Field(
        default_factory=lambda: {
            "bigblue": "BBS",
            "duckworks": "DKW",
            "tokyo_toys": "TKT",
            "southern_cold": "SCC",
            "harbour_leasing": "HLX",
        },
        description="Container owners by name, with their ISO 6346 owner code (3 letters).",
    )
    voyages: Voyages = Field(default_factory=Voyages)
    satellite: Satellite = Field(default_factory=Satellite)
    containers: Containers = Field(default_factory=Containers)
    incidents: Incidents = Field(default_factory=Incidents)

    @model_validator(mode="after")
    def _hubs_called(self) -> ShippingDomain:
        called = {p for s in self.services for p in s.rotation}
        missing = sorted(set(self.hubs) - called)
        if missing:
            raise ValueError(f"hubs {missing} are not called by any service")
        bad = [c for c in self.owners.values() if len(c) != 3 or not c.isalpha() or not c.isupper()]
        if bad:
            raise ValueError(f"owner codes must be 3 capital letters; got {bad}")
        return self

    @property
    def topic(self) -> str:
        """Where events go (for summaries): three topics, by what an event is about."""
        return ", ".join(
            t.name for t in (SHIPPING_POSITIONS, SHIPPING_CONTAINERS, SHIPPING_PORT_EVENTS)
        )

    @property
    def ports(self) -> list[str]:
        """Every called port, in order of first call."""
        return list(dict.fromkeys(p for s in self.services for p in s.rotation))
