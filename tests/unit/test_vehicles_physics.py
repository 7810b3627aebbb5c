"""Vehicle physics on its own: gears and rpm, braking for stops, coolant warm-up and climbs,
parked cooling, tyres, fuel."""

from __future__ import annotations

import numpy as np
import pytest

from scenarios.vehicles.config import VehicleType
from scenarios.vehicles.physics import (
    B_MAX,
    Gearbox,
    coolant_step,
    coolant_target,
    engine_load,
    fuel_burn_l,
    next_speed,
    parked_coolant,
    stop_allowance,
    tyre_pressures,
    tyre_warmth,
)

CAR = VehicleType()


def rng() -> np.random.Generator:
    return np.random.default_rng(0)


def test_rpm_is_speed_times_the_gear_ratio_and_gears_rise_with_speed() -> None:
    box = Gearbox([CAR], np.zeros(200, dtype=np.int64))
    v = np.linspace(0, 180, 200)
    zeros = np.zeros(200)
    rpm, gear = box.rpm(np.arange(200), v, zeros, zeros, np.full(200, 90.0), rng())
    ratios = CAR.top_gear_rpm_per_kmh * CAR.gear_step ** (CAR.gears - 1 - np.arange(CAR.gears))
    driving = gear >= 0
    assert np.allclose(rpm[driving], v[driving] * ratios[gear[driving]], atol=40)
    assert (np.diff(gear[driving]) >= 0).all() and gear.max() == CAR.gears - 1
    below_top = driving & (gear < CAR.gears - 1)
    assert (rpm[below_top] <= CAR.shift_rpm + 40).all()  # changes up at shift_rpm
    assert rpm[~driving] == pytest.approx(CAR.idle_rpm, abs=40)  # idle when barely moving
    assert rpm[-1] == pytest.approx(180 * CAR.top_gear_rpm_per_kmh, abs=40)


def test_cold_engines_idle_fast_and_hard_acceleration_changes_up_later() -> None:
    box = Gearbox([CAR], np.zeros(2, dtype=np.int64))
    idle, _ = box.rpm(
        np.arange(2), np.zeros(2), np.zeros(2), np.zeros(2), np.array([5.0, 90.0]), rng()
    )
    assert idle[0] == pytest.approx(CAR.fast_idle_rpm, abs=40)
    assert idle[1] == pytest.approx(CAR.idle_rpm, abs=40)
    v = np.full(2, 50.0)
    rpm, _ = box.rpm(np.arange(2), v, np.array([0.0, 2.5]), np.zeros(2), np.full(2, 90.0), rng())
    assert rpm[1] > rpm[0]


def drive_to_stop(v0: float, gap: float, dt: float = 1.0) -> tuple[list[float], list[float]]:
    g = np.random.default_rng(1)
    v, s = np.array([v0]), 0.0
    speeds, positions = [v0], [0.0]
    for _ in range(200):
        allowance = stop_allowance(np.array([gap - s - 0.5]), v, np.zeros(1), dt)
        v_new = next_speed(
            v, np.array([30.0]), allowance, 2.5, 50.0, np.zeros(1), np.zeros(1, bool), dt, g
        )
        s += float((v + v_new)[0]) / 2 * dt
        v = v_new
        speeds.append(float(v[0]))
        positions.append(s)
        if v[0] < 1.0 and gap - s < 1.0:
            break
    return speeds, positions


@pytest.mark.parametrize(("v0", "gap"), [(30.0, 400.0), (14.0, 120.0), (36.0, 1500.0), (8.0, 30.0)])
def test_vehicles_brake_for_stops_smoothly_and_stop_at_them(v0: float, gap: float) -> None:
    speeds, positions = drive_to_stop(v0, gap)
    decel = np.diff(speeds)
    assert decel.min() >= -B_MAX - 0.5
    assert positions[-1] == pytest.approx(gap, abs=1.5)
    assert speeds[-1] < 1.0


def test_next_edge_allowance_slows_to_the_lower_limit_at_the_boundary() -> None:
    v = np.array([36.0])
    allowance = stop_allowance(np.array([0.0]), v, np.array([14.0]), 1.0)
    assert allowance[0] <= 14.0 + 1e-9
    far = stop_allowance(np.array([2000.0]), v, np.array([14.0]), 1.0)
    assert far[0] > 40


def warm_up(minutes: int, grade: float = 0.0) -> np.ndarray:
    t = np.array([5.0])
    out = []
    for _ in range(minutes * 60):
        load = engine_load(np.array([22.0]), np.zeros(1), np.array([grade]), 2.5, 52.0)
        target = coolant_target(np.array([90.0]), load, np.array([grade]), np.array([80.0]), 7.0)
        t = coolant_step(t, target, load, 1.0)
        out.append(t[0])
    return np.array(out)


def test_coolant_warms_up_steadily_then_holds_at_the_thermostat() -> None:
    curve = warm_up(30)
    assert (np.diff(curve) >= -1e-9).all()
    reached = int(np.argmax(curve > 85))
    assert 5 * 60 < reached < 20 * 60
    assert curve[-1] == pytest.approx(90 + 3 * 0.1 + 3 * 0.45 * (22 / 52) ** 2, abs=1.5)


def test_a_climb_raises_coolant_a_little_and_it_recovers() -> None:
    t = np.array([91.0])
    history = []
    for k in range(600):
        grade = np.array([0.05 if k < 120 else 0.0])
        load = engine_load(np.array([22.0]), np.zeros(1), grade, 2.5, 52.0)
        t = coolant_step(
            t, coolant_target(np.array([90.0]), load, grade, np.array([80.0]), 7.0), load, 1.0
        )
        history.append(t[0])
    peak = max(history)
    assert 93 < peak < 102
    assert history[-1] < 92


def test_parked_engines_cool_towards_ambient() -> None:
    cooled = parked_coolant(
        np.array([90.0, 90.0]), np.array([5.0, 5.0]), np.array([600.0, 12 * 3600.0])
    )
    assert 70 < cooled[0] < 90 and cooled[1] == pytest.approx(5.0, abs=0.5)


def test_tyres_warm_with_driving_and_pressure_rises_with_warmth() -> None:
    warm = np.zeros(1)
    for _ in range(3600):
        warm = tyre_warmth(warm, np.array([120.0]), 1.0)
    assert warm[0] == pytest.approx(1.0, abs=0.01)
    pressures = tyre_pressures(np.full((1, 4), 240.0), warm, rng())
    assert pressures.mean() == pytest.approx(240 * 1.07, abs=1)
    cooled = warm
    for _ in range(600):  # ten minutes in town: a gentle fall
        cooled = tyre_warmth(cooled, np.array([40.0]), 1.0)
    assert 0.85 < cooled[0] < 1.0


def test_fuel_burn_grows_with_distance_and_idling_costs_a_little() -> None:
    burn = fuel_burn_l(
        np.array([0.0, 30.0, 30.0]),
        np.array([0.0, 30.0, 30.0]),
        np.zeros(3),
        np.zeros(3),
        7.0,
        0.8,
        1.0,
    )
    assert 0 < burn[0] < burn[1] == burn[2]
    per_100km = burn[1] * 100_000 / 30
    assert 5 < per_100km < 12
