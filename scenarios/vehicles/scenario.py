"""Connected vehicles: a fleet driving trips between real cities, sending telemetry at 1 Hz.

One SimPy cohort process per entity class (car, van, truck, ...) steps all its vehicles with
numpy. A parked vehicle sleeps (no telemetry) until its next departure (`shifts`); it
then gets a route to another city (`routes`) and reports every `interval_s` while the
ignition is on: position along the route, speed from a cruise controller that brakes for stops
and lower limits, and a powertrain whose readings hang together (`physics`). Faults
are injected and labelled per incident (`faults`).

Connectivity: tunnels and dead zones on the route take the vehicle offline (store-and-forward
until it is expected out of the zone, plus a modem re-attach of 2-10 s), on top of the engine's
own outage model per class. Tunnels also mean no GPS: lat/lon are null inside.

Hard negatives (truth `hard_negative`, only on readings without a fault label):
- `tunnel`: readings in a tunnel (no position) and the first fix after it;
- `cold_start`: a trip started with coolant below `cold_starts.below_c`, until it reaches
  `cold_starts.warm_c` (low coolant, fast idle, a steep but harmless warm-up);
- `hill`: on a climb and after it, where the coolant is raised by it (a brief rise);
- `hard_brake`, `brief_speeding`, `cold_battery`: a single hard but legal braking, a brief
  burst over the limit in traffic, a cold battery slow to recover on a cold morning
  (`lookalikes`).
No reading is marked within 2 minutes after an incident's last one: an alert on the incident
that also names those readings would count as a hard-negative alert.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from core.contracts import VEHICLE_TELEMETRY
from core.names import STREAM_SALT
from scenarios.vehicles.cities import Cities
from scenarios.vehicles.config import (
    HARD_NEGATIVES,
    STUCK_SIGNALS,
    TYRES,
    VEHICLE_FAULTS,
    VehiclesDomain,
    VehicleType,
)
from scenarios.vehicles.encoding import VehicleEventEncoder
from scenarios.vehicles.faults import (
    BATTERY_FAILURE,
    GPS_JUMP,
    HARSH_BRAKING,
    NONE,
    OVERHEATING,
    SPEEDING,
    STUCK_SENSOR,
    TYRE_LEAK,
    Faults,
)
from scenarios.vehicles.lookalikes import MIN_BRAKE_KMH, Lookalikes
from scenarios.vehicles.physics import (
    TYRE_COOL_TAU_S,
    Gearbox,
    battery_voltage,
    coolant_step,
    coolant_target,
    engine_load,
    fuel_burn_l,
    next_speed,
    oil_pressure,
    parked_coolant,
    stop_allowance,
    tyre_pressures,
    tyre_warmth,
)
from scenarios.vehicles.route_pool import RoutePool
from scenarios.vehicles.routes import (
    DEAD_ZONE,
    HILL,
    M_PER_DEG,
    MOTORWAY,
    TUNNEL,
    URBAN,
    make_route,
)
from scenarios.vehicles.shifts import Shifts
from simulators.encoding import PayloadField, payload_fields
from simulators.entities import EntityTable
from simulators.intervals import IdCounter
from simulators.records import NO_ID, Readings
from simulators.scenario import Scenario
from simulators.seeds import rng_for
from simulators.truth import TruthField

if TYPE_CHECKING:
    from scenarios.catalog import ScenarioConfig

SCHEMA = VEHICLE_TELEMETRY.id
PAYLOAD = payload_fields(VEHICLE_TELEMETRY)  # road_class by its index in ROAD_CLASSES
HARD_NEGATIVE = PayloadField("hard_negative", "int")  # truth only, never in the event
HILL_MARK, COLD_MARK, TUNNEL_MARK = (
    HARD_NEGATIVES.index(h) + 1 for h in ("hill", "cold_start", "tunnel")
)
TRIPS_PER_VEHICLE = 10_000  # trip_id = (vehicle index + 1) * 10_000 + trip number
HILL_MARK_MAX_MS = 300_000.0  # a climb's mark ends at most this long after it
HILL_RISE_C = 1.5  # ... and only covers readings where the coolant is this much above normal
QUIET_AFTER_INCIDENT_MS = 120_000.0  # no hard-negative marks this soon after an incident
REATTACH_S = (2.0, 10.0)
GPS_SPEED_MIN_KMH = 2.0
OPEN_ROAD_M = 4000.0  # speeding starts only this far before the next change of road class
SPEEDING_HEADROOM = 1.25  # ... and where the vehicle can do this much over the limit


class VehicleCohort:
    """All vehicles of one entity class (one vehicle type), stepped together."""

    def __init__(
        self,
        entities: range,
        kind: VehicleType,
        d: VehiclesDomain,
        cities: Cities,
        start_ms: int,
        rng: np.random.Generator,
        incidents: IdCounter,
    ) -> None:
        n = len(entities)
        self.lo, self.n, self.d, self.kind = entities.start, n, d, kind
        self.cities, self.rng = cities, rng
        self.dt = d.interval_s
        self.step_ms = d.interval_s * 1000
        self.pool = RoutePool(n)
        self.faults = Faults(n, d.faults, rng, incidents)
        self.looks = Lookalikes(
            n, d.hard_negatives, np.random.Generator(np.random.PCG64(int(rng.integers(2**62))))
        )
        self.shifts = Shifts(d.trips, rng, n)
        self.gearbox = Gearbox([kind], np.zeros(n, dtype=np.int64))
        # per-vehicle constants
        self.driver = np.clip(d.driver.speed_factor.sample(rng, n), 0.8, 1.08)
        self.ambient = d.ambient_c.sample(rng, n)
        self.thermostat = kind.thermostat_c.sample(rng, n)
        self.charging = kind.charging_v.sample(rng, n)
        nominal = kind.tyre_kpa.sample(rng, n)
        self.tyre_nominal = nominal[:, None] + rng.normal(0.0, 2.0, (n, 4))
        self.v_max = kind.max_speed_kmh / 3.6
        self.legal = kind.legal_max_kmh or np.inf
        # state
        self.driving = np.zeros(n, dtype=bool)
        self.next_ms = np.zeros(n)  # next reading while driving; next departure while parked
        self.city = cities.homes(rng, n)
        self.dest = self.city.copy()
        self.trip_no = np.zeros(n, dtype=np.int64)
        self.trip_start = np.zeros(n)
        self.s = np.zeros(n)
        self.ptr = np.zeros(n, dtype=np.int64)  # current edge, relative to the route
        self.stop_ptr = np.zeros(n, dtype=np.int64)  # next stop, relative
        self.stop_until = np.zeros(n)
        self.v = np.zeros(n)
        self.odo = rng.uniform(5_000.0, 250_000.0, n)
        self.fuel_l = kind.tank_l * rng.uniform(0.3, 1.0, n)
        self.coolant = self.ambient.copy()
        self.warm = np.zeros(n)
        self.cold_kpa = self.tyre_nominal.copy()
        self.heading = rng.uniform(0.0, 360.0, n)
        self.traffic = np.ones(n)
        self.jam_until = np.zeros(n)
        self.jam_factor = np.ones(n)
        self.zone = np.zeros(n, dtype=np.int8)
        self.offline_until = np.zeros(n)
        self.cold = np.zeros(n, dtype=bool)
        self.hill_mark = np.zeros(n, dtype=bool)
        self.hill_left = np.zeros(n)
        self.quiet_until = np.zeros(n)
        self.park_ms = np.full(n, float(start_ms) - 12 * 3_600_000)
        self.coolant_at_park = self.ambient.copy()
        self.warm_at_park = np.zeros(n)
        self._start(float(start_ms))

    # -- the fleet at the start and departures ----------------------------------------------

    def _start(self, t0: float) -> None:
        """Who is mid-trip, parked between trips, or parked for the night at t0."""
        n, rng = self.n, self.rng
        v = np.arange(n)
        offset = self.cities.utc_offset_h[self.city]
        at = np.full(n, t0)
        on = self.shifts.on_shift(v, at, offset)
        moving = on & (rng.random(n) < self.d.trips.driving_at_start)
        dwelling = on & ~moving
        off = ~on
        # parked for the night: leave at the next shift start; engines cold
        self.next_ms[off] = self.shifts.next_departure(v[off], at[off], offset[off])
        # parked between trips: warm-ish, leave within a dwell
        dwell = np.maximum(self.d.trips.dwell_s.sample(rng, int(dwelling.sum())), 60.0)
        self.next_ms[dwelling] = t0 + rng.uniform(0.0, 1.0, dwell.shape[0]) * dwell * 1000
        self.park_ms[dwelling] = t0 - rng.uniform(0.0, 1.0, dwell.shape[0]) * dwell * 1000
        self.coolant_at_park[dwelling] = self.thermostat[dwelling]
        self.warm_at_park[dwelling] = 0.7
        mid = np.flatnonzero(moving)
        if mid.size:
            self._depart(mid, np.full(mid.size, t0), progress=rng.uniform(0.02, 0.95, mid.size))
            self.next_ms[mid] = t0 + rng.uniform(0.0, self.step_ms, mid.size)

    def _depart(self, v: np.ndarray, t: np.ndarray, progress: np.ndarray | None = None) -> None:
        """Start trips: a route to another city, the engine started after parking."""
        d, rng = self.d, self.rng
        dests = np.array([self.cities.destination(int(c), d.trips, rng) for c in self.city[v]])
        routes = [
            make_route(self.cities, int(a), int(b), d.roads, d.zones, d.trips, rng)
            for a, b in zip(self.city[v].tolist(), dests.tolist(), strict=True)
        ]
        self.pool.assign(v, routes)
        self.dest[v] = dests
        self.trip_no[v] += 1
        self.driving[v] = True
        self.trip_start[v] = t
        self.zone[v] = 0
        self.offline_until[v] = 0.0
        self.hill_mark[v] = False
        self.jam_until[v] = 0.0
        self.traffic[v] = 1.0
        self.cold_kpa[v] = self.tyre_nominal[v]  # any leak was fixed while parked
        low = v[self.fuel_l[v] < 0.45 * self.kind.tank_l]
        self.fuel_l[low] = self.kind.tank_l * rng.uniform(0.9, 1.0, low.size)
        if progress is None:  # from rest, after parking
            parked_s = np.maximum(t - self.park_ms[v], 0.0) / 1000
            self.coolant[v] = parked_coolant(self.coolant_at_park[v], self.ambient[v], parked_s)
            self.warm[v] = self.warm_at_park[v] * np.exp(-parked_s / TYRE_COOL_TAU_S)
            self.s[v] = 0.0
            self.ptr[v] = 0
            self.stop_ptr[v] = 0
            self.v[v] = 0.0
            cold = self.coolant[v] < d.cold_starts.below_c
            idle = np.where(
                cold,
                np.maximum(d.cold_starts.fast_idle_s.sample(rng, v.size), 0.0),
                rng.uniform(3.0, 10.0, v.size),
            )
            self.stop_until[v] = t + idle * 1000
            self.cold[v] = cold
            self.looks.trip_started(v, self.ambient[v])
            return
        # mid-trip at the start of the run: warm, somewhere along the route at cruise
        for k, route in enumerate(routes):
            s0 = float(progress[k]) * route.length_m
            j = int(v[k])
            self.s[j] = s0
            self.ptr[j] = min(int(np.searchsorted(route.s, s0, side="right")) - 1, len(route.s) - 2)
            self.stop_ptr[j] = int(np.searchsorted(route.stops, s0, side="right"))
            gap = float(route.stops[self.stop_ptr[j]]) - s0
            limit = min(float(route.limit[self.ptr[j]]), self.legal) / 3.6
            self.v[j] = min(limit * self.driver[j], np.sqrt(2 * 2.0 * max(gap - 5.0, 0.0)))
            self.heading[j] = float(route.heading[self.ptr[j]])
        self.coolant[v] = self.thermostat[v]
        self.warm[v] = rng.uniform(0.5, 0.9, v.size)
        self.stop_until[v] = 0.0
        self.trip_start[v] = t - 600_000.0
        self.cold[v] = False

    # -- stepping ---------------------------------------------------------------------------

    def readings(self, t0_ms: int, t1_ms: int) -> Readings | None:
        parts: list[Readings] = []
        while True:
            leaving = np.flatnonzero(~self.driving & (self.next_ms < t1_ms))
            if leaving.size:
                self._depart(leaving, self.next_ms[leaving])
            due = np.flatnonzero(self.driving & (self.next_ms < t1_ms))
            if due.size == 0:
                break
            parts.append(self._step(due))
        if not parts:
            return None
        if len(parts) == 1:
            return parts[0]
        return Readings(
            ent=np.concatenate([p.ent for p in parts]),
            true_ms=np.concatenate([p.true_ms for p in parts]),
            label=np.concatenate([p.label for p in parts]),
            incident=np.concatenate([p.incident for p in parts]),
            payload={k: np.concatenate([p.payload[k] for p in parts]) for k in parts[0].payload},
            offline_until=np.concatenate(
                [p.offline_until for p in parts if p.offline_until is not None]
            ),
        )

    def _advance(self, i: np.ndarray, s: np.ndarray) -> np.ndarray:
        """Move each vehicle's edge pointer up to position s; return absolute vertex indices."""
        pool = self.pool
        last_edge = pool.hi[i] - 2
        a = pool.lo[i] + self.ptr[i]
        vs = pool.v.cols["s"]
        while True:
            move = (a < last_edge) & (vs[np.minimum(a + 1, pool.v.used - 1)] <= s)
            if not move.any():
                break
            a = a + move
        self.ptr[i] = a - pool.lo[i]
        return a

    def _step(self, i: np.ndarray) -> Readings:
        d, rng, dt, k = self.d, self.rng, self.dt, i.shape[0]
        cols = self.pool.v.cols
        stops = self.pool.st.cols["stop"]
        t = self.next_ms[i].copy()
        s, v = self.s[i], self.v[i]

        # where on the route, and what the road asks for
        a = self._advance(i, s)
        road, grade = cols["road"][a], cols["grade"][a]
        limit = np.minimum(cols["limit"][a], self.legal)
        next_limit = np.minimum(cols["limit"][a + 1], self.legal)
        edge_end = cols["s"][a + 1]
        final_edge = a + 1 >= self.pool.hi[i] - 1
        stop_at = self.pool.stop_lo[i] + self.stop_ptr[i]
        stop_pos = stops[stop_at]
        final_stop = stop_at >= self.pool.stop_hi[i] - 1
        waiting = self.stop_until[i] > t

        # traffic: a slow random factor, and jams on motorways
        noise = d.driver.traffic_noise
        tau = 120.0
        traffic = self.traffic[i]
        traffic += (1.0 - traffic) * dt / tau + noise * np.sqrt(2 * dt / tau) * rng.normal(0, 1, k)
        self.traffic[i] = traffic = np.clip(traffic, 0.75, 1.06)
        jam_start = (road == MOTORWAY) & (self.jam_until[i] <= t)
        jam_start &= rng.random(k) < d.roads.jams_per_hour * dt / 3600
        jam_start &= np.isnan(self.faults.speeding_factor(i))
        if jam_start.any():
            j = i[jam_start]
            self.jam_until[j] = (
                t[jam_start] + np.maximum(d.roads.jam_s.sample(rng, j.size), 0) * 1000
            )
            self.jam_factor[j] = np.clip(d.roads.jam_factor.sample(rng, j.size), 0.05, 1.0)
        jam = np.where(self.jam_until[i] > t, self.jam_factor[i], 1.0)

        # faults that may start now
        v_kmh = v * 3.6
        zone_here = cols["zone"][a]
        rolling = v_kmh > 20.0
        eligible = np.zeros((k, len(VEHICLE_FAULTS)), dtype=bool)
        eligible[:, OVERHEATING] = rolling & (self.coolant[i] > self.thermostat[i] - 3.0)
        eligible[:, TYRE_LEAK] = rolling
        eligible[:, STUCK_SENSOR] = rolling
        eligible[:, GPS_JUMP] = rolling & (zone_here != TUNNEL)
        eligible[:, HARSH_BRAKING] = v_kmh > 40.0
        open_road = (road != URBAN) & (cols["road_end"][a] - s > OPEN_ROAD_M)
        open_road &= limit * SPEEDING_HEADROOM <= self.kind.max_speed_kmh  # trucks: limiter
        eligible[:, SPEEDING] = open_road & (v_kmh > 50.0) & (jam == 1.0) & (zone_here != TUNNEL)
        eligible[:, BATTERY_FAILURE] = (t - self.trip_start[i]) > 60_000
        route_left_m = self.pool.v.cols["s"][self.pool.hi[i] - 1] - s
        eligible &= (route_left_m >= d.faults.min_route_left_km * 1000)[:, None]
        self.faults.start(i, t, dt, eligible)
        calm = (self.faults.kind[i] == NONE) & (self.quiet_until[i] <= t)
        self.looks.start(
            i,
            t,
            dt,
            calm & (v_kmh > MIN_BRAKE_KMH),
            calm & open_road & (v_kmh > 50.0) & (jam == 1.0),
        )

        # speed
        factor = self.driver[i] * traffic
        speeding = self.faults.speeding_factor(i)
        factor = np.where(np.isnan(speeding), factor, speeding)
        burst = self.looks.factor(i, t)
        factor = np.where(np.isnan(burst), factor, burst)
        cruise = np.minimum(limit / 3.6 * factor * jam, self.v_max)
        next_cruise = np.where(final_edge, 0.0, next_limit / 3.6 * factor * jam)
        allowance = np.minimum(
            stop_allowance(stop_pos - s - 0.5, v, np.zeros(k), dt),
            stop_allowance(edge_end - s, v, next_cruise, dt),
        )
        v_new = next_speed(
            v, cruise, allowance, self.kind.accel_ms2, self.v_max, grade, waiting, dt, rng
        )
        brake = np.maximum(self.faults.braking(i, t, v), self.looks.braking(i, t, v))
        v_new = np.where(brake > 0, np.maximum(v - brake * dt, 0.0), v_new)
        s_new = s + (v + v_new) / 2 * dt
        overrun = final_stop & (s_new > stop_pos)  # never past the destination
        s_new = np.where(overrun, stop_pos, s_new)
        v_new = np.where(overrun, 0.0, v_new)
        gap = stop_pos - s_new
        arrived = ~waiting & (gap < 1.0) & (v_new < 1.0)
        passed = ~final_stop & ~arrived & (gap < -1.0)  # could not stop: drove through
        v_new = np.where(arrived, 0.0, v_new)
        accel = (v_new - v) / dt
        self.odo[i] += (s_new - s) / 1000
        self.s[i], self.v[i] = s_new, v_new

        # position and heading at the new place
        a = self._advance(i, s_new)
        s_a, s_b = cols["s"][a], cols["s"][a + 1]
        frac = np.clip((s_new - s_a) / np.maximum(s_b - s_a, 1e-9), 0.0, 1.0)
        lat = cols["lat"][a] + frac * (cols["lat"][a + 1] - cols["lat"][a])
        lon = cols["lon"][a] + frac * (cols["lon"][a + 1] - cols["lon"][a])
        zone, grade = cols["zone"][a], cols["grade"][a].astype(np.float64)
        road = cols["road"][a]
        limit = np.minimum(cols["limit"][a], self.legal)
        v_kmh = v_new * 3.6
        turning = v_kmh >= GPS_SPEED_MIN_KMH
        heading = np.where(
            turning,
            np.mod(cols["heading"][a] + rng.normal(0.0, 0.8, k), 360.0),
            self.heading[i],
        )
        self.heading[i] = heading
        noise_deg = d.gps_noise_m / M_PER_DEG
        lat = lat + rng.normal(0.0, noise_deg, k)
        lon = lon + rng.normal(0.0, noise_deg, k) / np.cos(np.radians(lat))

        # powertrain
        before = self.coolant[i]
        rpm, _ = self.gearbox.rpm(i, v_kmh, accel, grade, before, rng)
        load = engine_load(v_new, accel, grade, self.kind.accel_ms2, self.v_max)
        target = coolant_target(self.thermostat[i], load, grade, v_kmh, d.zones.hill_coolant_c)
        coolant = self.faults.coolant(i, t, before, coolant_step(before, target, load, dt), dt)
        self.coolant[i] = coolant
        oil = oil_pressure(rpm, coolant, rng)
        self.fuel_l[i] = np.maximum(
            self.fuel_l[i]
            - fuel_burn_l(
                s_new - s,
                v_new,
                accel,
                grade,
                self.kind.consumption_l_per_100km,
                self.kind.idle_l_per_h,
                dt,
            ),
            0.0,
        )
        battery = battery_voltage(self.charging[i], (t - self.trip_start[i]) / 1000, rng)
        since_start_s = (t - self.trip_start[i]) / 1000
        battery = self.looks.battery(i, since_start_s, self.charging[i], battery)
        battery = self.faults.battery(i, t, battery)
        self.warm[i] = warm = tyre_warmth(self.warm[i], v_kmh, dt)
        self.faults.tyre_leak(i, t, self.cold_kpa, dt)
        tyres = tyre_pressures(self.cold_kpa[i], warm, rng)
        signals = {
            "coolant_c": coolant + rng.normal(0.0, 0.12, k),
            "oil_pressure_kpa": oil,
            "battery_v": battery,
            **{name: tyres[:, n] for n, name in enumerate(TYRES)},
        }

        # what the report shows: faults, then no fix in tunnels
        self.faults.report(i, signals, lat, lon)
        in_tunnel = zone == TUNNEL
        lat = np.where(in_tunnel, np.nan, lat)
        lon = np.where(in_tunnel, np.nan, lon)
        label, incident = self.faults.labels(i)

        # hard negatives: on readings without a label, not just after an incident (an alert on
        # the incident's last events would otherwise count as a hard-negative alert)
        on_hill = (zone == HILL) & (grade > 0)
        self.hill_left[i[on_hill]] = t[on_hill]
        climbing = on_hill | (self.hill_mark[i] & (t - self.hill_left[i] < HILL_MARK_MAX_MS))
        self.hill_mark[i] = climbing
        raised = coolant > self.thermostat[i] + 3.0 * load + HILL_RISE_C  # the climb shows
        after_tunnel = (self.zone[i] == TUNNEL) & ~in_tunnel
        mark = np.where(climbing & raised, HILL_MARK, 0)
        mark = np.where(self.cold[i], COLD_MARK, mark)
        mark = np.where(in_tunnel | after_tunnel, TUNNEL_MARK, mark)
        looks = self.looks.marks(i, t, v_kmh / np.maximum(limit, 1.0), battery)
        mark = np.where(looks > 0, looks, mark)
        self.quiet_until[i[label != 0]] = t[label != 0] + QUIET_AFTER_INCIDENT_MS
        mark = np.where((label == 0) & (t >= self.quiet_until[i]), mark, 0)
        self.cold[i] &= coolant < d.cold_starts.warm_c

        # connectivity: entering a tunnel or dead zone takes the vehicle offline until it is
        # expected out of it (plus a modem re-attach)
        zones = d.zones
        cuts = ((zone == TUNNEL) & zones.offline_in_tunnels) | (
            (zone == DEAD_ZONE) & zones.offline_in_dead_zones
        )
        entering = cuts & (zone != self.zone[i])
        if entering.any():
            j = i[entering]
            left = cols["zone_end"][a[entering]] - s_new[entering]
            expected_s = left / np.maximum(v_new[entering], 3.0) + rng.uniform(*REATTACH_S, j.size)
            self.offline_until[j] = t[entering] + expected_s * 1000
        self.zone[i] = zone
        until = self.offline_until[i]
        offline = np.where(until > t, np.floor(until), NO_ID).astype(np.int64)

        # stops, and the end of the trip
        stopping = arrived & ~final_stop
        if stopping.any():
            j = i[stopping]
            self.stop_until[j] = (
                t[stopping] + np.maximum(d.roads.stop_s.sample(rng, j.size), 1.0) * 1000
            )
        self.stop_ptr[i[stopping | passed]] += 1
        self.faults.finish(
            i,
            t,
            coolant,
            self.thermostat[i],
            road == URBAN,
            v_kmh / np.maximum(limit, 1.0),
            ~in_tunnel,
        )
        ended = i[arrived & final_stop]
        if ended.size:
            self._park(ended, t[arrived & final_stop])

        payload = {
            "trip_id": (i + self.lo + 1) * TRIPS_PER_VEHICLE + self.trip_no[i] % TRIPS_PER_VEHICLE,
            "road_class": road.astype(np.int32),
            "speed_limit_kmh": limit.astype(np.int64),
            "lat": lat,
            "lon": lon,
            "speed_kmh": v_kmh,
            "heading_deg": np.mod(np.rint(heading), 360.0),
            "odometer_km": self.odo[i],
            "rpm": rpm.astype(np.int64),
            "coolant_c": signals["coolant_c"],
            "oil_pressure_kpa": signals["oil_pressure_kpa"],
            "fuel_pct": 100.0 * self.fuel_l[i] / self.kind.tank_l,
            "battery_v": signals["battery_v"],
            **{name: signals[name] for name in TYRES},
            "accel_long_ms2": accel + rng.normal(0.0, 0.03, k),
            "hard_negative": mark.astype(np.int64),
        }
        self.next_ms[i] = np.where(self.driving[i], t + self.step_ms, self.next_ms[i])
        return Readings(
            ent=(i + self.lo).astype(np.int32),
            true_ms=np.floor(t).astype(np.int64),
            label=label,
            incident=incident,
            payload=payload,
            offline_until=offline,
        )

    def _park(self, v: np.ndarray, t: np.ndarray) -> None:
        self.faults.stop(v)
        self.looks.stop(v)
        self.driving[v] = False
        self.city[v] = self.dest[v]
        self.park_ms[v] = t
        self.coolant_at_park[v] = self.coolant[v]
        self.warm_at_park[v] = self.warm[v]
        self.cold[v] = False
        offset = self.cities.utc_offset_h[self.city[v]]
        self.next_ms[v] = self.shifts.next_departure(v, t, offset)


class VehiclesScenario(Scenario):
    schema = SCHEMA
    entity_field = "vehicle_id"
    labels = ("none", *VEHICLE_FAULTS)

    def __init__(self, config: ScenarioConfig) -> None:
        self.config = config
        self.domain: VehiclesDomain = config.domain  # type: ignore[assignment]
        self.topic = self.domain.topic
        self.id_prefix = self.domain.id_prefix
        self.entity_ids = vehicle_ids(config.entities)
        self.payload = (*PAYLOAD, HARD_NEGATIVE)
        self.truth_fields = (
            TruthField.choices("hard_negative", HARD_NEGATIVE.name, (None, *HARD_NEGATIVES)),
        )

    @property
    def own_outages(self) -> bool:
        """Tunnels or dead zones take vehicles offline (verify-stream: outages beyond the
        engine's are expected)."""
        z = self.domain.zones
        tunnels = z.offline_in_tunnels and z.tunnels_per_100km > 0
        return tunnels or (z.offline_in_dead_zones and z.dead_zones_per_100km > 0)

    def encoder(self, id_prefix: str, table: EntityTable) -> VehicleEventEncoder:
        return VehicleEventEncoder(
            self.schema,
            self.entity_field,
            id_prefix,
            table,
            PAYLOAD,
            nullable=VEHICLE_TELEMETRY.nullable(),
            signed=VEHICLE_TELEMETRY.signed(),
        )

    def sources(self, table: EntityTable) -> list[VehicleCohort]:
        config, d = self.config, self.domain
        cities = Cities.load(d.region, config.start)
        incidents = IdCounter()
        return [
            VehicleCohort(
                table.class_range(c),
                d.vehicle_types.get(cls.name, d.vehicle),
                d,
                cities,
                config.start_ms,
                rng_for(config.seed, STREAM_SALT["vehicles"], "cohort", cls.name),
                incidents,
            )
            for c, cls in enumerate(table.classes)
            if len(table.class_range(c))
        ]


def vehicle_ids(count: int) -> list[str]:
    width = max(6, len(str(count - 1)))
    return [f"veh-{i:0{width}d}" for i in range(count)]


__all__ = ["STUCK_SIGNALS", "VehicleCohort", "VehiclesScenario", "vehicle_ids"]
