"""Duty shifts: when each vehicle drives, in local time at the city it is in.

Each vehicle has a daily shift (a local start hour and a length, drawn once). Within it, it
drives trips separated by dwells; after its shift (or when the next dwell would run past it) it
parks until the next day's start (give or take 15 minutes). While parked the ignition is off and
the telematics unit sleeps: no telemetry until the next departure.
"""

from __future__ import annotations

import numpy as np

from scenarios.vehicles.config import Trips

HOUR_MS = 3_600_000.0
DAY_JITTER_H = 0.25


class Shifts:
    def __init__(self, trips: Trips, rng: np.random.Generator, n: int) -> None:
        self.trips = trips
        self.rng = rng
        self.start_h = np.mod(trips.shift_start_h.sample(rng, n), 24.0)
        self.hours = np.clip(trips.shift_hours.sample(rng, n), 0.5, 23.0)

    def phase_h(self, v: np.ndarray, t_ms: np.ndarray, utc_offset_h: np.ndarray) -> np.ndarray:
        """Hours since the vehicle's latest shift start (0..24), local time."""
        local_h = t_ms / HOUR_MS + utc_offset_h
        return np.mod(local_h - self.start_h[v], 24.0)

    def on_shift(self, v: np.ndarray, t_ms: np.ndarray, utc_offset_h: np.ndarray) -> np.ndarray:
        return self.phase_h(v, t_ms, utc_offset_h) < self.hours[v]

    def next_departure(
        self, v: np.ndarray, t_ms: np.ndarray, utc_offset_h: np.ndarray
    ) -> np.ndarray:
        """When vehicles that park at `t_ms` leave again (epoch ms): after a dwell if that still
        falls in their shift, else at the next shift start."""
        dwell_h = np.maximum(self.trips.dwell_s.sample(self.rng, v.shape[0]), 60.0) / 3600
        phase = self.phase_h(v, t_ms, utc_offset_h)
        next_start = 24.0 - phase + self.rng.normal(0.0, DAY_JITTER_H, v.shape[0])
        wait_h = np.where(phase + dwell_h < self.hours[v], dwell_h, np.maximum(next_start, dwell_h))
        return t_ms + wait_h * HOUR_MS
