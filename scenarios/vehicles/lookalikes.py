"""Hard negatives near the fault rules' boundaries: legitimate driving that looks like a fault.

- hard_brake: one hard but legal braking (a light turning red, a car pulling out), with a
  deceleration drawn from a realistic range (`HardBrake.decel_ms2`, mostly 3.4-7.4 m/s²) that
  overlaps the harsh-braking faults'; what sets a fault apart is a cluster of them.
- brief_speeding: a burst over the limit in traffic (an overtake, a merge), at up to ~1.4 x
  the limit for seconds to about a minute (`BriefSpeeding`).
- cold_battery: on a cold morning (ambient below `below_ambient_c`), a start from rest whose
  voltage stays low for a while: a deep crank (`crank_v`) and a slow climb back to the
  charging voltage (`recharge_tau_s`).

Each marks its readings (truth `hard_negative`) from its start until it has passed: the
braking plus 5 s, the burst until the speed is back within 10% of the limit, the cold battery
until the voltage is back above 13 V. None starts while a fault incident runs.
"""

from __future__ import annotations

import numpy as np

from scenarios.vehicles.config import HARD_NEGATIVES, HardNegatives

HARD_BRAKE_MARK, BRIEF_SPEEDING_MARK, COLD_BATTERY_MARK = (
    HARD_NEGATIVES.index(h) + 1 for h in ("hard_brake", "brief_speeding", "cold_battery")
)
BRAKE_TAIL_MS = 5_000.0
RECHARGED_V = 13.0
MIN_BRAKE_KMH = 30.0


class Lookalikes:
    def __init__(self, n: int, settings: HardNegatives, rng: np.random.Generator) -> None:
        self.s = settings
        self.rng = rng
        hb, bs = settings.hard_brake.rate_per_hour, settings.brief_speeding.rate_per_hour
        self.brake_wait_s = rng.exponential(3600.0 / hb, n) if hb > 0 else np.full(n, np.inf)
        self.speed_wait_s = rng.exponential(3600.0 / bs, n) if bs > 0 else np.full(n, np.inf)
        self.brake_until = np.zeros(n)
        self.brake_decel = np.zeros(n)
        self.speed_until = np.zeros(n)
        self.speed_factor = np.ones(n)
        self.speed_mark = np.zeros(n, dtype=bool)
        self.cold = np.zeros(n, dtype=bool)
        self.crank_v = np.zeros(n)
        self.tau_s = np.ones(n)

    def trip_started(self, v: np.ndarray, ambient_c: np.ndarray) -> None:
        """Vehicles `v` start from rest: a cold battery for some on a cold morning."""
        c = self.s.cold_battery
        cold = (ambient_c < c.below_ambient_c) & (self.rng.random(v.size) < c.share)
        self.cold[v] = cold
        self.crank_v[v] = c.crank_v.sample(self.rng, v.size)
        self.tau_s[v] = np.maximum(c.recharge_tau_s.sample(self.rng, v.size), 1.0)

    def start(
        self, i: np.ndarray, t: np.ndarray, dt: float, brake_ok: np.ndarray, speed_ok: np.ndarray
    ) -> None:
        """Count driving time down; start the brakings and bursts due where allowed."""
        rng = self.rng
        self.brake_wait_s[i] -= dt
        self.speed_wait_s[i] -= dt
        brake = brake_ok & (self.brake_wait_s[i] <= 0) & (self.brake_until[i] <= t)
        if brake.any():
            w = i[brake]
            s = self.s.hard_brake
            self.brake_wait_s[w] = rng.exponential(3600.0 / s.rate_per_hour, w.size)
            self.brake_decel[w] = np.maximum(s.decel_ms2.sample(rng, w.size), 1.0)
            self.brake_until[w] = t[brake] + np.maximum(s.brake_s.sample(rng, w.size), 0.5) * 1000
        burst = speed_ok & (self.speed_wait_s[i] <= 0) & (self.speed_until[i] <= t)
        if burst.any():
            w = i[burst]
            s2 = self.s.brief_speeding
            self.speed_wait_s[w] = rng.exponential(3600.0 / s2.rate_per_hour, w.size)
            self.speed_factor[w] = np.maximum(s2.factor.sample(rng, w.size), 1.0)
            self.speed_until[w] = t[burst] + np.maximum(s2.duration_s.sample(rng, w.size), 1) * 1000
            self.speed_mark[w] = True

    def factor(self, i: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Cruise as a share of the limit for vehicles in a burst, NaN for the others."""
        return np.where(self.speed_until[i] > t, self.speed_factor[i], np.nan)

    def braking(self, i: np.ndarray, t: np.ndarray, v_ms: np.ndarray) -> np.ndarray:
        """Deceleration (m/s², > 0) of a hard braking now, 0 for most."""
        on = (self.brake_until[i] > t) & (v_ms * 3.6 > 1.0)
        return np.where(on, self.brake_decel[i], 0.0)

    def battery(
        self, i: np.ndarray, since_start_s: np.ndarray, charging: np.ndarray, volts: np.ndarray
    ) -> np.ndarray:
        """Voltage of cold batteries climbing back after the start; `volts` for the others."""
        cold = self.cold[i]
        if not cold.any():
            return volts
        climb = charging - (charging - self.crank_v[i]) * np.exp(
            -np.maximum(since_start_s, 0.0) / self.tau_s[i]
        )
        low = cold & (climb < RECHARGED_V)
        self.cold[i[cold & ~low]] = False
        noise = self.rng.normal(0.0, 0.02, i.shape[0])
        return np.where(low, climb + noise, volts)

    def marks(
        self, i: np.ndarray, t: np.ndarray, speed_ratio: np.ndarray, volts: np.ndarray
    ) -> np.ndarray:
        """The hard-negative mark of each reading just taken (0: none)."""
        braking = self.brake_until[i] + BRAKE_TAIL_MS > t
        bursting = self.speed_mark[i]
        self.speed_mark[i[bursting & (self.speed_until[i] <= t) & (speed_ratio <= 1.1)]] = False
        cold = self.cold[i] & (volts < RECHARGED_V)
        mark = np.where(cold, COLD_BATTERY_MARK, 0)
        mark = np.where(bursting, BRIEF_SPEEDING_MARK, mark)
        return np.where(braking, HARD_BRAKE_MARK, mark)

    def stop(self, v: np.ndarray) -> None:
        """Parked: whatever ran ends."""
        self.brake_until[v] = 0.0
        self.speed_until[v] = 0.0
        self.speed_mark[v] = False
        self.cold[v] = False
