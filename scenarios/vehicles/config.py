"""Knobs of the vehicles domain: a fleet driving trips between real cities.

Sections: where (region), when and how far (trips, shifts), on what roads (road classes and
zones), in what (vehicle types per entity class), by whom (driver), and what goes wrong (faults).
Vehicle types are keyed by entity class name; a class without one uses `vehicle`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from core.config.base import Settings
from core.contracts import events, labels, topics
from simulators.distributions import Distribution, Exponential, LogNormal, Normal, Uniform

# Order matters: a fault's label index is its position + 1 (0 is "none").
VEHICLE_FAULTS = labels.VEHICLE_FAULTS
FaultType = Literal[
    "overheating",
    "tyre_leak",
    "stuck_sensor",
    "gps_jump",
    "harsh_braking",
    "speeding",
    "battery_failure",
]
# Situations that look like a fault but are not (truth `hard_negative`).
HARD_NEGATIVES = ("hill", "cold_start", "tunnel", "hard_brake", "brief_speeding", "cold_battery")
ROAD_CLASSES = events.ROAD_CLASSES  # order matters: the encoder writes road_class by index
TYRES = events.TYRES
STUCK_SIGNALS = ("coolant_c", "oil_pressure_kpa", "battery_v", *TYRES)
StuckSignal = Literal[
    "coolant_c",
    "oil_pressure_kpa",
    "battery_v",
    "tyre_fl_kpa",
    "tyre_fr_kpa",
    "tyre_rl_kpa",
    "tyre_rr_kpa",
]


class Region(Settings):
    """The cities trips run between (GeoNames cities of at least 15,000 people)."""

    countries: list[str] = Field(
        default_factory=lambda: ["DE"],
        description="ISO 3166 country codes (e.g. [DE, AT, CH]); empty: any country.",
    )
    bbox: tuple[float, float, float, float] | None = Field(
        None, description="Optional box [south, west, north, east] in degrees, within countries."
    )
    min_population: int = Field(50_000, ge=15_000, description="Smallest city used.")
    max_cities: int = Field(
        300, ge=2, le=3000, description="Keep at most this many cities, the most populous."
    )

    @field_validator("bbox")
    @classmethod
    def _box(
        cls, bbox: tuple[float, float, float, float] | None
    ) -> tuple[float, float, float, float] | None:
        if bbox is not None:
            south, west, north, east = bbox
            if not (-90 <= south < north <= 90 and -180 <= west < east <= 180):
                raise ValueError("must be [south, west, north, east] with south < north")
        return bbox


class Trips(Settings):
    """Trips between cities within duty shifts; vehicles park between trips and overnight."""

    min_km: float = Field(20.0, gt=0, description="Shortest trip, straight-line km.")
    max_km: float = Field(400.0, gt=0, description="Longest trip, straight-line km.")
    via_town: float = Field(
        0.5, ge=0, le=1, description="Chance a route bends through a town near its line."
    )
    bend: float = Field(
        0.08, ge=0, le=0.3, description="Typical sideways bend of a route leg, share of its length."
    )
    shift_start_h: Distribution = Field(
        Normal(mean=7.5, std=1.0), description="Local hour a vehicle's day starts (per vehicle)."
    )
    shift_hours: Distribution = Field(
        Normal(mean=9.0, std=1.5), description="Hours from day start to the last departure."
    )
    dwell_s: Distribution = Field(
        LogNormal(median=900.0, sigma=0.7), description="Parked time between trips, seconds."
    )
    driving_at_start: float = Field(
        0.8, ge=0, le=1, description="Share of on-shift vehicles already mid-trip at start."
    )

    @model_validator(mode="after")
    def _lengths(self) -> Trips:
        if self.max_km < self.min_km:
            raise ValueError(f"max_km ({self.max_km}) must be >= min_km ({self.min_km})")
        return self


class RoadClass(Settings):
    """A road class: its speed limits and how often traffic stops on it."""

    speed_limits_kmh: list[int] = Field(
        min_length=1, description="Limits a stretch may have (km/h), drawn by `limit_weights`."
    )
    limit_weights: list[float] | None = Field(
        None, description="Relative weight of each limit; default: equal."
    )
    stretch_km: Distribution = Field(
        Exponential(mean=10.0), description="Length of a stretch with one limit, km."
    )
    stops_per_km: float = Field(
        0.0, ge=0, description="Traffic lights, junctions and queues that stop a vehicle, per km."
    )

    @model_validator(mode="after")
    def _weights(self) -> RoadClass:
        if any(v <= 0 for v in self.speed_limits_kmh):
            raise ValueError("speed limits must be > 0")
        w = self.limit_weights
        if w is not None and (len(w) != len(self.speed_limits_kmh) or min(w) < 0 or sum(w) <= 0):
            raise ValueError("limit_weights: one weight >= 0 per limit, positive sum")
        return self


class Roads(Settings):
    """Road classes along a route: urban at both ends, rural access, motorway in between."""

    motorway: RoadClass = Field(
        RoadClass(
            speed_limits_kmh=[130, 120, 100],
            limit_weights=[0.5, 0.3, 0.2],
            stretch_km=Exponential(mean=25.0),
        ),
        description="Motorways (no stops; jams).",
    )
    rural: RoadClass = Field(
        RoadClass(
            speed_limits_kmh=[100, 80, 70],
            limit_weights=[0.6, 0.3, 0.1],
            stretch_km=Exponential(mean=6.0),
            stops_per_km=0.08,
        ),
        description="Rural roads.",
    )
    urban: RoadClass = Field(
        RoadClass(
            speed_limits_kmh=[50, 30],
            limit_weights=[0.85, 0.15],
            stretch_km=Exponential(mean=1.5),
            stops_per_km=1.2,
        ),
        description="Town streets.",
    )
    motorway_min_km: float = Field(
        35.0, ge=0, description="Routes shorter than this use no motorway."
    )
    access_km: Distribution = Field(
        Uniform(low=2.0, high=8.0), description="Rural road between town and motorway, km."
    )
    stop_s: Distribution = Field(
        Uniform(low=8.0, high=60.0), description="How long a stop lasts, seconds."
    )
    jams_per_hour: float = Field(
        0.4, ge=0, description="Slowdowns per vehicle-hour on motorways (Poisson)."
    )
    jam_factor: Distribution = Field(
        Uniform(low=0.15, high=0.5), description="Speed during a slowdown, share of cruise."
    )
    jam_s: Distribution = Field(Exponential(mean=240.0), description="Slowdown length, seconds.")


class Zones(Settings):
    """Stretches of rural roads and motorways with special conditions, placed per route."""

    tunnels_per_100km: float = Field(
        1.0, ge=0, description="Tunnels per 100 km outside towns: no GPS, no network."
    )
    tunnel_km: Distribution = Field(
        LogNormal(median=0.6, sigma=0.7), description="Tunnel length, km (0.1 to 5)."
    )
    dead_zones_per_100km: float = Field(
        0.8, ge=0, description="Mobile dead zones per 100 km outside towns: GPS but no network."
    )
    dead_zone_km: Distribution = Field(
        Uniform(low=1.5, high=6.0), description="Dead zone length, km."
    )
    hills_per_100km: float = Field(
        3.0, ge=0, description="Long climbs per 100 km outside towns (coolant rises briefly)."
    )
    hill_km: Distribution = Field(Uniform(low=1.0, high=3.0), description="Climb length, km.")
    hill_grade_pct: Distribution = Field(
        Uniform(low=3.0, high=7.0), description="Climb gradient, percent."
    )
    hill_coolant_c: float = Field(
        7.0, ge=0, le=15, description="Coolant rise on a 5% climb at cruising speed, °C."
    )
    offline_in_tunnels: bool = Field(
        True, description="Tunnels cut the network (store-and-forward until the exit)."
    )
    offline_in_dead_zones: bool = Field(
        True, description="Dead zones cut the network (store-and-forward until out of it)."
    )


class VehicleType(Settings):
    """Powertrain and tyres of a kind of vehicle."""

    tank_l: float = Field(55.0, gt=0, description="Fuel tank, litres.")
    consumption_l_per_100km: float = Field(7.0, gt=0, description="Fuel use at steady speed.")
    idle_l_per_h: float = Field(0.8, ge=0, description="Fuel use while idling, litres/hour.")
    max_speed_kmh: float = Field(190.0, gt=0, description="Top speed.")
    legal_max_kmh: float | None = Field(
        None,
        gt=0,
        description="Limit for this kind on any road (e.g. trucks 80); events show "
        "min(road limit, this) as speed_limit_kmh.",
    )
    accel_ms2: float = Field(2.5, gt=0, le=6, description="Strongest acceleration from rest.")
    gears: int = Field(6, ge=1, le=16, description="Forward gears.")
    top_gear_rpm_per_kmh: float = Field(21.0, gt=0, description="rpm per km/h in top gear.")
    gear_step: float = Field(
        1.38, ge=1, le=3, description="Ratio between neighbouring gears (geometric)."
    )
    shift_rpm: float = Field(2300.0, gt=0, description="Change up at this rpm (cruising).")
    idle_rpm: float = Field(780.0, gt=0, description="Warm idle rpm.")
    fast_idle_rpm: float = Field(1350.0, gt=0, description="Idle rpm of a cold engine.")
    tyre_kpa: Distribution = Field(
        Uniform(low=230.0, high=250.0), description="Cold tyre pressure, per vehicle, kPa."
    )
    thermostat_c: Distribution = Field(
        Normal(mean=90.0, std=1.5), description="Warm coolant temperature, per vehicle, °C."
    )
    charging_v: Distribution = Field(
        Uniform(low=13.9, high=14.4), description="Battery voltage with the engine running."
    )


class Driver(Settings):
    """How vehicles are driven."""

    speed_factor: Distribution = Field(
        Normal(mean=0.96, std=0.04),
        description="Cruise speed as a share of the limit, per vehicle (clipped to 0.8..1.08).",
    )
    traffic_noise: float = Field(
        0.04, ge=0, le=0.2, description="Std of the slow traffic factor on cruise speed."
    )


class Overheating(Settings):
    """Coolant climbs steadily past its normal level, holds high, then recovers."""

    slope_c_per_min: Distribution = Field(
        Uniform(low=2.0, high=5.0), description="Rise, °C per minute."
    )
    peak_c: Distribution = Field(Uniform(low=112.0, high=125.0), description="Peak, °C.")
    hold_s: Distribution = Field(Uniform(low=60.0, high=240.0), description="Time at the peak, s.")


class TyreLeak(Settings):
    """One tyre loses pressure slowly; it is fixed while parked after the trip."""

    kpa_per_min: Distribution = Field(
        Uniform(low=1.0, high=5.0), description="Pressure loss, kPa per minute."
    )
    duration_s: Distribution = Field(
        Uniform(low=600.0, high=1800.0), description="How long it leaks (then holds), s."
    )


class StuckSensor(Settings):
    """One signal freezes at its current value."""

    duration_s: Distribution = Field(Uniform(low=300.0, high=1200.0), description="Seconds.")
    signals: list[StuckSignal] = Field(
        default_factory=lambda: list(STUCK_SIGNALS),  # type: ignore[arg-type]
        min_length=1,
        description="Signals that can freeze (one per incident, drawn evenly).",
    )


class GpsJump(Settings):
    """Reported positions jump far away for a few readings."""

    distance_km: Distribution = Field(Uniform(low=5.0, high=50.0), description="Jump, km.")
    readings: Distribution = Field(
        Uniform(low=1.0, high=5.0), description="Readings at the wrong place (rounded, >= 1)."
    )


class HarshBraking(Settings):
    """A cluster of emergency decelerations within a few minutes."""

    events: Distribution = Field(
        Uniform(low=1.6, high=6.4), description="Brakings per cluster (rounded, >= 1): 2 to 6."
    )
    within_s: Distribution = Field(
        Uniform(low=60.0, high=360.0), description="Span the brakings fall in, s."
    )
    decel_ms2: Distribution = Field(
        LogNormal(median=7.2, sigma=0.14),
        description="Deceleration of a braking, m/s² (mostly 5.5 to 9.5: emergency stops on "
        "dry to damp roads; at least 3).",
    )
    brake_s: Distribution = Field(
        Uniform(low=1.0, high=3.0), description="Length of a braking, s (cut short at rest)."
    )


class Speeding(Settings):
    """Sustained driving well over the limit (starts on rural roads or motorways)."""

    factor: Distribution = Field(
        LogNormal(median=1.3, sigma=0.09),
        description="Speed as a share of the limit (mostly 1.1 to 1.55).",
    )
    duration_s: Distribution = Field(Uniform(low=90.0, high=600.0), description="Seconds.")


class BatteryFailure(Settings):
    """Charging fails: the voltage drops to the battery's and sags steadily."""

    rest_v: Distribution = Field(
        Uniform(low=12.15, high=12.6),
        description="Voltage the battery falls to when charging stops (its state of charge).",
    )
    volts_per_min: Distribution = Field(
        LogNormal(median=0.1, sigma=0.5),
        description="Sag from `rest_v`, volts per minute (mostly 0.04 to 0.27).",
    )
    duration_s: Distribution = Field(
        Uniform(low=600.0, high=1800.0), description="Seconds until charging recovers."
    )


def _fault_rates() -> dict[FaultType, float]:
    return {kind: 0.05 for kind in VEHICLE_FAULTS}  # type: ignore[misc]


class VehicleFaults(Settings):
    """Injected faults: each incident labels the events that carry it."""

    rate_per_hour: dict[FaultType, float] = Field(
        default_factory=_fault_rates,
        description="Incidents per driving vehicle-hour, per fault type (missing: 0).",
    )
    min_route_left_km: float = Field(
        15.0,
        ge=0,
        description="A fault starts only with this much of the trip's route ahead (an incident "
        "cut short by the trip's end would never show: an overheating takes up to 10 min).",
    )
    overheating: Overheating = Field(default_factory=Overheating, description="Overheating.")
    tyre_leak: TyreLeak = Field(default_factory=TyreLeak, description="Slow tyre leak.")
    stuck_sensor: StuckSensor = Field(default_factory=StuckSensor, description="Frozen signal.")
    gps_jump: GpsJump = Field(default_factory=GpsJump, description="GPS jump.")
    harsh_braking: HarshBraking = Field(
        default_factory=HarshBraking, description="Harsh-braking cluster."
    )
    speeding: Speeding = Field(default_factory=Speeding, description="Sustained speeding.")
    battery_failure: BatteryFailure = Field(
        default_factory=BatteryFailure, description="Failing battery charge."
    )

    @model_validator(mode="after")
    def _rates(self) -> VehicleFaults:
        if any(r < 0 for r in self.rate_per_hour.values()):
            raise ValueError("rate_per_hour values must be >= 0")
        return self


class HardBrake(Settings):
    """Hard negative: one hard but legal braking (a light turning red, a car pulling out)."""

    rate_per_hour: float = Field(0.3, ge=0, description="Per driving vehicle-hour.")
    decel_ms2: Distribution = Field(
        LogNormal(median=5.0, sigma=0.2), description="Deceleration, m/s² (mostly 3.4 to 7.4)."
    )
    brake_s: Distribution = Field(
        Uniform(low=1.0, high=2.5), description="Length of the braking, s."
    )


class BriefSpeeding(Settings):
    """Hard negative: a brief burst over the limit in traffic (an overtake, a merge)."""

    rate_per_hour: float = Field(0.3, ge=0, description="Per driving vehicle-hour.")
    factor: Distribution = Field(
        LogNormal(median=1.22, sigma=0.07),
        description="Speed as a share of the limit (mostly 1.1 to 1.4).",
    )
    duration_s: Distribution = Field(
        LogNormal(median=20.0, sigma=0.5), description="Seconds over (mostly 8 to 55)."
    )


class ColdBattery(Settings):
    """Hard negative: a cold battery on a cold morning: the voltage stays low for a while after
    the start, until the alternator has recharged it."""

    below_ambient_c: float = Field(
        5.0, description="A trip from rest at an ambient temperature below this may show it."
    )
    share: float = Field(0.6, ge=0, le=1, description="Share of such starts that show it.")
    crank_v: Distribution = Field(
        Uniform(low=11.4, high=12.2), description="Voltage just after the start."
    )
    recharge_tau_s: Distribution = Field(
        LogNormal(median=15.0, sigma=0.6),
        description="Time constant of the voltage's climb to the charging voltage, s.",
    )


class HardNegatives(Settings):
    """Legitimate driving near the fault rules' boundaries, marked in truth."""

    hard_brake: HardBrake = Field(default_factory=HardBrake, description="Single hard brakings.")
    brief_speeding: BriefSpeeding = Field(
        default_factory=BriefSpeeding, description="Brief bursts over the limit."
    )
    cold_battery: ColdBattery = Field(
        default_factory=ColdBattery, description="Cold batteries on cold mornings."
    )


class ColdStarts(Settings):
    """Trips that start with a cold engine (marked as hard negatives until warm)."""

    below_c: float = Field(40.0, description="A trip starting with coolant below this is cold.")
    warm_c: float = Field(70.0, description="The cold-start mark ends at this coolant level.")
    fast_idle_s: Distribution = Field(
        Uniform(low=20.0, high=60.0), description="Idling at fast idle before moving off, s."
    )


class VehiclesDomain(Settings):
    """A fleet of connected vehicles sending telemetry while driving between cities."""

    type: Literal["vehicles"] = "vehicles"
    topic: str = Field(
        topics.VEHICLES_TELEMETRY.name, pattern=r"^[a-zA-Z0-9._-]+$", description="Kafka topic."
    )
    id_prefix: str = Field(
        "cv", pattern=r"^[a-z0-9]+$", description="Prefix of event, outage and incident ids."
    )
    interval_s: float = Field(
        1.0, ge=0.1, le=60, description="Telemetry interval while the ignition is on, seconds."
    )
    region: Region = Field(default_factory=Region, description="Where the fleet drives.")
    trips: Trips = Field(default_factory=Trips, description="Trips and duty shifts.")
    roads: Roads = Field(default_factory=Roads, description="Road classes and traffic.")
    zones: Zones = Field(default_factory=Zones, description="Tunnels, dead zones and hills.")
    vehicle: VehicleType = Field(
        default_factory=VehicleType, description="The vehicle type of classes not in vehicle_types."
    )
    vehicle_types: dict[str, VehicleType] = Field(
        default_factory=dict, description="Vehicle type per entity class name."
    )
    driver: Driver = Field(default_factory=Driver, description="Driving style.")
    ambient_c: Distribution = Field(
        Normal(mean=8.0, std=4.0), description="Outside temperature per vehicle, °C."
    )
    gps_noise_m: float = Field(3.0, ge=0, le=100, description="Std of GPS position noise, m.")
    cold_starts: ColdStarts = Field(default_factory=ColdStarts, description="Cold starts.")
    faults: VehicleFaults = Field(default_factory=VehicleFaults, description="Injected faults.")
    hard_negatives: HardNegatives = Field(
        default_factory=HardNegatives, description="Legitimate driving near the boundaries."
    )
