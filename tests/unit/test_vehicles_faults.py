"""Fault injection on its own: Poisson onsets in driving time, one incident at a time, and what
each fault does to the readings."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from scenarios.vehicles.config import STUCK_SIGNALS, VEHICLE_FAULTS, VehicleFaults
from scenarios.vehicles.faults import (
    BATTERY_FAILURE,
    GPS_JUMP,
    HARSH_BRAKING,
    KM_PER_DEG,
    NONE,
    OVERHEATING,
    SPEEDING,
    STUCK_SENSOR,
    TYRE_LEAK,
    Faults,
)
from simulators.intervals import IdCounter

N = 1000


def faults(only: str | None = None, rate: float = 0.5, **settings: Any) -> Faults:
    rates = {k: (rate if only in (None, k) else 0.0) for k in VEHICLE_FAULTS}
    cfg = VehicleFaults.model_validate({"rate_per_hour": rates, **settings})
    return Faults(N, cfg, np.random.default_rng(7), IdCounter())


def start_now(f: Faults, kind: int, t: float = 0.0) -> np.ndarray:
    """Start an incident of `kind` on every vehicle at time t."""
    f.wait_s[:, :] = np.inf
    f.wait_s[:, kind] = 0.0
    eligible = np.zeros((N, len(VEHICLE_FAULTS)), dtype=bool)
    eligible[:, kind] = True
    v = np.arange(N)
    f.start(v, np.full(N, t), 1.0, eligible)
    assert (f.kind == kind).all()
    return v


def test_onsets_are_poisson_in_driving_time_per_type() -> None:
    f = faults()
    v = np.arange(N)
    counts = np.zeros(len(VEHICLE_FAULTS))
    for step in range(3600):  # one driving hour; each incident ends at once
        before = f.kind.copy()
        f.start(v, np.full(N, step * 1000.0), 1.0, np.ones((N, len(VEHICLE_FAULTS)), dtype=bool))
        new = (before == NONE) & (f.kind != NONE)
        np.add.at(counts, f.kind[new], 1)
        f.stop(v)
    expected = N * 0.5
    assert np.abs(counts - expected).max() < 4 * np.sqrt(expected)


def test_time_parked_or_ineligible_does_not_start_faults_but_counts_down_only_when_driving() -> (
    None
):
    f = faults("tyre_leak", rate=3600.0)  # due after ~1 s of driving
    half = np.arange(N // 2)
    never = np.zeros((half.size, len(VEHICLE_FAULTS)), dtype=bool)
    for step in range(20):
        f.start(half, np.full(half.size, step * 1000.0), 1.0, never)
    assert (f.kind == NONE).all()
    assert (f.wait_s[N // 2 :, 1] > 0).mean() > 0.9  # the others did not drive: still waiting
    f.start(half, np.full(half.size, 30_000.0), 1.0, ~never)
    assert (f.kind[half] == TYRE_LEAK).all()


def test_one_incident_at_a_time_with_unique_ids() -> None:
    f = faults(rate=3600.0)
    v = np.arange(N)
    f.start(v, np.zeros(N), 5.0, np.ones((N, len(VEHICLE_FAULTS)), dtype=bool))
    ids = f.id.copy()
    f.start(v, np.full(N, 1000.0), 5.0, np.ones((N, len(VEHICLE_FAULTS)), dtype=bool))
    assert np.array_equal(f.id, ids)  # still the first incidents
    assert np.unique(ids).size == N
    label, incident = f.labels(v)
    assert (label == f.kind + 1).all() and np.array_equal(incident, ids)


def test_overheating_climbs_past_110_holds_then_recovers_and_ends() -> None:
    f = faults("overheating", overheating={"slope_c_per_min": 4.0, "peak_c": 115.0, "hold_s": 60})
    v = start_now(f, OVERHEATING)
    coolant = np.full(N, 90.0)
    thermostat = np.full(N, 90.0)
    history = []
    for step in range(1200):
        t = np.full(N, step * 1000.0)
        normal = coolant + (90.0 - coolant) * 0.02
        coolant = f.coolant(v, t, coolant, normal, 1.0)
        history.append(coolant[0])
        f.finish(v, t, coolant, thermostat, np.zeros(N, bool), np.ones(N))
        if f.kind[0] == NONE:
            break
    history_arr = np.array(history)
    assert history_arr.max() == 115.0
    rising = history_arr[: int(np.argmax(history_arr))]
    assert np.diff(rising).mean() * 60 == pytest.approx(4.0, rel=0.01)
    assert history_arr[-1] < 95 and f.kind[0] == NONE


def test_a_stuck_signal_repeats_its_first_value_exactly_until_it_ends() -> None:
    f = faults("stuck_sensor", stuck_sensor={"duration_s": 10, "signals": ["coolant_c"]})
    v = start_now(f, STUCK_SENSOR)
    seen = []
    for step in range(12):
        signals = {name: np.random.default_rng(step).normal(90, 1, N) for name in STUCK_SIGNALS}
        f.report(v, signals, np.zeros(N), np.zeros(N))
        seen.append(signals["coolant_c"][0])
        f.finish(
            v,
            np.full(N, step * 1000.0),
            np.full(N, 90.0),
            np.full(N, 90.0),
            np.zeros(N, bool),
            np.ones(N),
        )
    assert len(set(seen[:11])) == 1 and seen[11] != seen[0]  # ends after its 10 s


def test_a_gps_jump_moves_a_few_readings_kilometres_away() -> None:
    f = faults("gps_jump", gps_jump={"distance_km": 20, "readings": 3})
    v = start_now(f, GPS_JUMP)
    moved = []
    for step in range(5):
        lat, lon = np.full(N, 50.0), np.full(N, 8.0)
        label, _ = f.labels(v)
        f.report(v, {n: np.zeros(N) for n in STUCK_SIGNALS}, lat, lon)
        km = np.hypot(lat - 50.0, (lon - 8.0) * np.cos(np.radians(lat))) * KM_PER_DEG
        moved.append((label[0], round(float(km[0]), 1)))
        f.finish(
            v, np.full(N, step * 1000.0), np.zeros(N), np.zeros(N), np.zeros(N, bool), np.ones(N)
        )
    assert moved[:3] == [(GPS_JUMP + 1, pytest.approx(20.0, abs=0.2))] * 3
    assert moved[3] == (0, 0.0)


def test_harsh_braking_brakes_several_times_when_fast_enough() -> None:
    f = faults("harsh_braking", harsh_braking={"events": 3, "within_s": 60, "brake_s": 2})
    v = start_now(f, HARSH_BRAKING)
    brakings = np.zeros(N)
    was = np.zeros(N, dtype=bool)
    for step in range(200):
        t = np.full(N, step * 1000.0)
        speed = np.full(N, 5.0 if step < 10 else 25.0)  # too slow at first: waits
        decel = f.braking(v, t, speed)
        now = decel > 0
        assert (decel[now] >= 3.0).all()  # drawn around 7.2 m/s², floored at 3
        if step < 10:
            assert not now.any()
        brakings += now & ~was
        was = now
        f.finish(v, t, np.zeros(N), np.zeros(N), np.zeros(N, bool), np.ones(N))
    assert (brakings == 3).all() and (f.kind == NONE).all()


def test_speeding_stops_in_town_but_its_label_lasts_until_back_near_the_limit() -> None:
    f = faults("speeding", speeding={"factor": 1.3, "duration_s": 600})
    v = start_now(f, SPEEDING)
    assert (f.speeding_factor(v) == 1.3).all()
    t, urban = np.full(N, 1000.0), np.ones(N, dtype=bool)
    f.finish(v, t, np.zeros(N), np.zeros(N), urban, np.full(N, 1.3))
    assert np.isnan(f.speeding_factor(v)).all() and (f.kind == SPEEDING).all()
    f.finish(v, t, np.zeros(N), np.zeros(N), urban, np.full(N, 1.1))
    assert (f.kind == NONE).all()


def test_a_failing_battery_sags_below_11_8_volts() -> None:
    f = faults(
        "battery_failure", battery_failure={"volts_per_min": 0.1, "duration_s": 900, "rest_v": 12.3}
    )
    v = start_now(f, BATTERY_FAILURE)
    volts = f.battery(v, np.full(N, 10 * 60_000.0), np.full(N, 14.2))
    assert volts.mean() == pytest.approx(12.3 - 1.0, abs=0.01)


def test_a_tyre_leak_loses_pressure_from_one_tyre_only() -> None:
    f = faults("tyre_leak", tyre_leak={"kpa_per_min": 3.0, "duration_s": 600})
    v = start_now(f, TYRE_LEAK)
    cold = np.full((N, 4), 240.0)
    for step in range(60):
        f.tyre_leak(v, np.full(N, step * 1000.0), cold, 1.0)
    lost = 240.0 - cold
    assert ((lost > 0).sum(axis=1) == 1).all()
    assert lost.max(axis=1) == pytest.approx(np.full(N, 3.0))


def test_a_gps_jump_counts_only_readings_with_a_position() -> None:
    f = faults("gps_jump", gps_jump={"distance_km": 20, "readings": 2})
    v = start_now(f, GPS_JUMP)
    labelled = []
    for step in range(6):
        label, _ = f.labels(v)
        labelled.append(int(label[0]))
        fix = np.full(N, step >= 3)  # a tunnel first: no position to move
        z = np.zeros(N)
        f.finish(v, np.full(N, step * 1000.0), z, z, np.zeros(N, bool), np.ones(N), fix)
    assert labelled == [GPS_JUMP + 1] * 5 + [0]  # 3 in the tunnel, then 2 fixes moved
