"""Fault injection for a cohort of vehicles: when incidents start, what they do, when they end.

Each fault type is a Poisson process in *driving* time per vehicle (rate per driving hour): a
countdown of driving seconds that, once run out, starts an incident at the first step where the
vehicle is free (one incident at a time) and the fault can show (e.g. speeding starts on a rural
road or motorway at speed; overheating on a warm engine). Every reading taken while an incident
runs carries its label and incident id.

What each fault does to the readings (the signature a detector can find):
- overheating: coolant climbs at `slope` °C/min to `peak` (> 110 °C), holds, then recovers;
  the incident ends once the coolant is back near its thermostat;
- tyre_leak: one tyre loses `rate` kPa/min for `duration`, then holds the low pressure (the
  tyre is fixed while parked after the trip);
- stuck_sensor: one signal repeats its value from the incident's first reading exactly;
- gps_jump: `readings` positions are offset by `distance` km, an impossible implied speed
  (readings in a tunnel, without a position, do not count);
- harsh_braking: `events` decelerations of `decel_ms2` (drawn per braking, mostly 5.5-9.5
  m/s², some below the rule's threshold) within `within_s` (each waits until the vehicle does
  27 km/h or more);
- speeding: cruise at `factor` x the limit (mostly +10% to +55%) for `duration` (starting on a
  rural road or motorway at least 4 km before a town, ending early in town, and never where
  the top speed allows no +25%: a truck's limiter); the label lasts until the speed is back
  within 15% of the limit;
- battery_failure: charging stops: the voltage drops to the battery's own (`rest_v`, drawn per
  incident) and sags by `volts_per_min`.
Incidents still running when a trip ends end with it; none starts with less than
`min_route_left_km` of the trip's route ahead (long enough for every fault to show).
"""

from __future__ import annotations

import numpy as np

from scenarios.vehicles.config import STUCK_SIGNALS, VEHICLE_FAULTS, VehicleFaults
from simulators.intervals import IdCounter
from simulators.records import NO_ID

(
    OVERHEATING,
    TYRE_LEAK,
    STUCK_SENSOR,
    GPS_JUMP,
    HARSH_BRAKING,
    SPEEDING,
    BATTERY_FAILURE,
) = range(len(VEHICLE_FAULTS))
NONE = -1
RAMP, HOLD, RECOVER = 0, 1, 2
MIN_BRAKING_MS = 7.5  # a harsh braking starts at 27 km/h or more (a 30 zone will do)
KM_PER_DEG = 111.195


class Faults:
    def __init__(
        self, n: int, settings: VehicleFaults, rng: np.random.Generator, ids: IdCounter
    ) -> None:
        self.s = settings
        self.rng = rng
        self.ids = ids
        self.rates = np.array([settings.rate_per_hour.get(k, 0.0) for k in VEHICLE_FAULTS])  # type: ignore[call-overload]
        self.wait_s = np.full((n, len(VEHICLE_FAULTS)), np.inf)
        for k in np.flatnonzero(self.rates > 0):
            self.wait_s[:, k] = rng.exponential(3600.0 / self.rates[k], n)
        self.kind = np.full(n, NONE, dtype=np.int8)
        self.id = np.full(n, NO_ID, dtype=np.int64)
        self.t0_ms = np.zeros(n)  # when the incident started
        self.end_ms = np.zeros(n)  # duration faults; harsh braking: give-up time
        self.phase = np.zeros(n, dtype=np.int8)
        self.a = np.zeros(n)  # slope, leak rate, jump dlat, spacing, factor, sag rate
        self.b = np.zeros(n)  # peak, frozen value, jump dlon
        self.c = np.zeros(n)  # hold seconds
        self.count = np.zeros(n, dtype=np.int64)  # tyre, signal, readings or brakings left
        self.brake_next = np.zeros(n)
        self.brake_until = np.zeros(n)
        self.brake_decel = np.zeros(n)

    # -- starting ---------------------------------------------------------------------------

    def start(self, i: np.ndarray, t: np.ndarray, dt: float, eligible: np.ndarray) -> None:
        """Count driving time down for vehicles `i` at times `t`; start the incidents due.
        `eligible[:, k]`: fault k can start for that vehicle now."""
        self.wait_s[i] -= dt
        due = (self.wait_s[i] <= 0) & eligible & (self.kind[i] == NONE)[:, None]
        rows = np.flatnonzero(due.any(axis=1))
        if rows.size == 0:
            return
        kinds = np.argmax(due[rows], axis=1)
        v = i[rows]
        self.wait_s[v, kinds] = self.rng.exponential(3600.0 / self.rates[kinds])
        self.kind[v] = kinds
        self.id[v] = self.ids.take(v.shape[0])
        self.phase[v] = RAMP
        self.t0_ms[v] = t[rows]
        for k in np.unique(kinds).tolist():
            self._begin(k, v[kinds == k], t[rows[kinds == k]])

    def _begin(self, k: int, v: np.ndarray, t: np.ndarray) -> None:
        s, rng, n = self.s, self.rng, v.shape[0]
        if k == OVERHEATING:
            self.a[v] = np.maximum(s.overheating.slope_c_per_min.sample(rng, n), 0.5)
            self.b[v] = np.maximum(s.overheating.peak_c.sample(rng, n), 111.0)
            self.c[v] = np.maximum(s.overheating.hold_s.sample(rng, n), 0.0)
        elif k == TYRE_LEAK:
            self.a[v] = np.maximum(s.tyre_leak.kpa_per_min.sample(rng, n), 0.1)
            self.count[v] = rng.integers(0, 4, n)
            self.end_ms[v] = t + np.maximum(s.tyre_leak.duration_s.sample(rng, n), 1.0) * 1000
        elif k == STUCK_SENSOR:
            names = s.stuck_sensor.signals
            index = np.array([STUCK_SIGNALS.index(name) for name in names])
            self.count[v] = index[rng.integers(0, len(names), n)]
            self.end_ms[v] = t + np.maximum(s.stuck_sensor.duration_s.sample(rng, n), 1.0) * 1000
        elif k == GPS_JUMP:
            km = np.maximum(s.gps_jump.distance_km.sample(rng, n), 1.0)
            bearing = rng.uniform(0.0, 2 * np.pi, n)
            self.a[v] = km * np.cos(bearing) / KM_PER_DEG  # dlat; dlon is scaled at report time
            self.b[v] = km * np.sin(bearing) / KM_PER_DEG
            self.count[v] = np.maximum(np.rint(s.gps_jump.readings.sample(rng, n)), 1)
        elif k == HARSH_BRAKING:
            events = np.maximum(np.rint(s.harsh_braking.events.sample(rng, n)), 1)
            within = np.maximum(s.harsh_braking.within_s.sample(rng, n), 1.0)
            self.count[v] = events
            self.a[v] = within / np.maximum(events - 1, 1)
            self.brake_next[v] = t
            self.brake_until[v] = 0.0
            self.end_ms[v] = t + 3 * within * 1000
        elif k == SPEEDING:
            self.a[v] = np.maximum(s.speeding.factor.sample(rng, n), 1.0)
            self.end_ms[v] = t + np.maximum(s.speeding.duration_s.sample(rng, n), 1.0) * 1000
        elif k == BATTERY_FAILURE:
            self.a[v] = np.maximum(s.battery_failure.volts_per_min.sample(rng, n), 0.0)
            self.b[v] = s.battery_failure.rest_v.sample(rng, n)
            self.end_ms[v] = t + np.maximum(s.battery_failure.duration_s.sample(rng, n), 1.0) * 1000

    # -- effects ----------------------------------------------------------------------------

    def _active(self, i: np.ndarray, k: int) -> np.ndarray:
        return self.kind[i] == k

    def speeding_factor(self, i: np.ndarray) -> np.ndarray:
        """Cruise as a share of the limit for speeding vehicles, NaN for the others."""
        return np.where(self._active(i, SPEEDING) & (self.phase[i] == RAMP), self.a[i], np.nan)

    def braking(self, i: np.ndarray, t: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Deceleration (m/s², > 0) forced on each vehicle now, 0 for most."""
        mine = self._active(i, HARSH_BRAKING)
        if not mine.any():
            return np.zeros(i.shape[0])
        start = mine & (self.count[i] > 0) & (t >= self.brake_next[i])
        start &= (t >= self.brake_until[i]) & (v >= MIN_BRAKING_MS)
        w = i[start]
        if w.size:
            hb = self.s.harsh_braking
            self.brake_decel[w] = np.maximum(hb.decel_ms2.sample(self.rng, w.size), 3.0)
            self.brake_until[w] = (
                t[start] + np.maximum(hb.brake_s.sample(self.rng, w.size), 1.0) * 1000
            )
            self.count[w] -= 1
            jitter = self.rng.uniform(0.5, 1.5, w.size)
            self.brake_next[w] = t[start] + self.a[w] * jitter * 1000
        on = mine & (t < self.brake_until[i])
        return np.where(on, self.brake_decel[i], 0.0)

    def coolant(
        self, i: np.ndarray, t: np.ndarray, before: np.ndarray, normal: np.ndarray, dt: float
    ) -> np.ndarray:
        """Coolant after this step for overheating vehicles; `normal` for the others."""
        mine = self._active(i, OVERHEATING)
        if not mine.any():
            return normal
        out = normal.copy()
        ramp = mine & (self.phase[i] == RAMP)
        risen = before + self.a[i] * dt / 60.0
        out[ramp] = np.minimum(risen[ramp], self.b[i][ramp])
        peaked = ramp & (risen >= self.b[i])
        self.phase[i[peaked]] = HOLD
        self.end_ms[i[peaked]] = t[peaked] + self.c[i[peaked]] * 1000
        hold = mine & (self.phase[i] == HOLD) & ~peaked
        out[hold] = self.b[i][hold]
        self.phase[i[hold & (t >= self.end_ms[i])]] = RECOVER
        return out

    def tyre_leak(self, i: np.ndarray, t: np.ndarray, cold_kpa: np.ndarray, dt: float) -> None:
        leaking = np.flatnonzero(self._active(i, TYRE_LEAK) & (t < self.end_ms[i]))
        if leaking.size:
            v = i[leaking]
            cold_kpa[v, self.count[v]] = np.maximum(
                cold_kpa[v, self.count[v]] - self.a[v] * dt / 60.0, 40.0
            )

    def battery(self, i: np.ndarray, t: np.ndarray, volts: np.ndarray) -> np.ndarray:
        mine = self._active(i, BATTERY_FAILURE)
        if not mine.any():
            return volts
        sag = self.b[i] - self.a[i] * (t - self.t0_ms[i]) / 60_000.0
        noise = self.rng.normal(0.0, 0.02, i.shape[0])
        return np.where(mine, np.maximum(sag, 10.5) + noise, volts)

    def report(
        self, i: np.ndarray, signals: dict[str, np.ndarray], lat: np.ndarray, lon: np.ndarray
    ) -> None:
        """Freeze stuck signals and move jumped positions, in place."""
        stuck = np.flatnonzero(self._active(i, STUCK_SENSOR))
        if stuck.size:
            v = i[stuck]
            fresh = self.phase[v] == RAMP
            for k, name in enumerate(STUCK_SIGNALS):
                mine = self.count[v] == k
                if not mine.any():
                    continue
                rows = stuck[mine]
                first = fresh[mine]
                self.b[v[mine][first]] = signals[name][rows[first]]
                signals[name][rows] = self.b[v[mine]]
            self.phase[v] = HOLD
        jump = np.flatnonzero(self._active(i, GPS_JUMP))
        if jump.size:
            v = i[jump]
            lat[jump] += self.a[v]
            lon[jump] += self.b[v] / np.cos(np.radians(lat[jump]))

    # -- labels and endings -----------------------------------------------------------------

    def labels(self, i: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(label index, incident id) of the readings just taken: label 0 is none."""
        kind = self.kind[i]
        return (kind.astype(np.int16) + 1), self.id[i]

    def finish(
        self,
        i: np.ndarray,
        t: np.ndarray,
        coolant: np.ndarray,
        thermostat: np.ndarray,
        urban: np.ndarray,
        speed_ratio: np.ndarray,
        fix: np.ndarray | None = None,
    ) -> None:
        """End the incidents whose last reading this was. Speeding stops at its end time or in
        town (`urban`), and its label lasts until the speed is back near the limit
        (`speed_ratio`: speed / limit). A GPS jump counts only readings with a position (`fix`,
        default all: there is none in a tunnel), so its jumped positions are reported."""
        kind, now = self.kind[i], t
        over = np.zeros(i.shape[0], dtype=bool)
        timed = (kind == STUCK_SENSOR) | (kind == BATTERY_FAILURE) | (kind == TYRE_LEAK)
        over |= timed & (now >= self.end_ms[i])
        speeding = kind == SPEEDING
        calm = speeding & ((now >= self.end_ms[i]) | urban)
        self.phase[i[calm]] = RECOVER
        over |= calm & (speed_ratio <= 1.15)
        over |= (kind == OVERHEATING) & (self.phase[i] == RECOVER) & (coolant < thermostat + 5.0)
        jump = kind == GPS_JUMP
        self.count[i[jump if fix is None else jump & fix]] -= 1
        over |= jump & (self.count[i] <= 0)
        braking = kind == HARSH_BRAKING
        done = (self.count[i] <= 0) & (now >= self.brake_until[i])
        over |= braking & (done | (now >= self.end_ms[i]))
        self.stop(i[over])

    def stop(self, v: np.ndarray) -> None:
        self.kind[v] = NONE
        self.id[v] = NO_ID
        self.brake_until[v] = 0.0
