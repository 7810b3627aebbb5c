"""Vehicle physics, vectorised over a cohort: speed control, gearbox, coolant, oil, fuel,
battery and tyres. Every function takes and returns numpy arrays for the vehicles stepped.

The models are simple but consistent with each other:
- speed follows a cruise target (limit x driver x traffic) with bounded acceleration, and
  brakes ahead of stops and lower limits so it can stop within `B_PLAN` (with 1 s steps: the
  distance of this step plus the braking distance after it stays within the gap);
- rpm = speed x the ratio of the gear the speed calls for (changing up later under strong
  acceleration or on a climb), idle (fast idle when cold) below the first gear's reach;
- coolant warms at a rate set by load while below its thermostat, then settles on it with a
  time constant (a climb raises the level it settles on); it cools towards ambient when parked;
- oil pressure follows rpm and is higher with cold oil; fuel falls with distance, load and idle
  time; the battery charges at the charging voltage once running; tyres warm while driving
  (more at speed) and cool slowly, and their pressure rises with their warmth.
"""

from __future__ import annotations

import numpy as np

from scenarios.vehicles.config import VehicleType

Num = np.ndarray | float  # per vehicle, or one value for all

B_PLAN = 2.5  # m/s², deceleration planned for stops and lower limits
B_MAX = 3.5  # m/s², the hardest normal braking
CRUISE_GAIN = 0.5  # 1/s, how fast speed closes on its cruise target
CRUISE_DECEL = 2.0  # m/s², the hardest deceleration towards a lower cruise target
ACCEL_NOISE = 0.12  # m/s², std of the driver's pedal noise while moving
HEAT_IDLE, HEAT_LOAD = 3.0, 9.0  # °C per minute while warming up, at idle and full load
COOLANT_TAU_S = 45.0  # settling on the thermostat (and back down after a climb)
CLIMB_TAU_S = 90.0  # settling upwards on a climb
PARKED_TAU_S = 2700.0  # coolant cooling towards ambient while parked
TYRE_TAU_S = 600.0  # tyres warming with speed
TYRE_COOL_TAU_S = 1800.0
TYRE_WARM_GAIN = 0.07  # pressure gain of a fully warm tyre
BATTERY_REST_V = 12.55  # a healthy battery without charging
CRANK_V = 12.2  # just after the start
CHARGE_TAU_S = 4.0
GRAVITY = 9.81


class Gearbox:
    """Gear ratios per vehicle (rpm per km/h), padded to the most gears of any type."""

    def __init__(self, types: list[VehicleType], type_of: np.ndarray) -> None:
        most = max(t.gears for t in types)
        ratios = np.full((len(types), most), np.nan)
        for k, t in enumerate(types):
            g = np.arange(t.gears)
            ratios[k, : t.gears] = t.top_gear_rpm_per_kmh * t.gear_step ** (t.gears - 1 - g)
        self.ratios = ratios  # per type; gear 0 is first gear
        self.gears = np.array([t.gears for t in types])
        self.shift_rpm = np.array([t.shift_rpm for t in types])
        self.idle = np.array([t.idle_rpm for t in types])
        self.fast_idle = np.array([t.fast_idle_rpm for t in types])
        self.type_of = type_of

    def rpm(
        self,
        veh: np.ndarray,
        v_kmh: np.ndarray,
        accel: np.ndarray,
        grade: np.ndarray,
        coolant: np.ndarray,
        rng: np.random.Generator,
    ) -> tuple[np.ndarray, np.ndarray]:
        """(rpm, gear index) for the vehicles `veh` (gear -1 at idle)."""
        t = self.type_of[veh]
        ratios = self.ratios[t]
        late = 1.0 + 0.25 * np.clip(accel / 2.0, 0.0, 1.0) + np.clip(grade * 4.0, 0.0, 0.3)
        up_at = (self.shift_rpm[t] * late)[:, None] / ratios  # km/h where each gear changes up
        up_at[np.arange(up_at.shape[1])[None, :] >= (self.gears[t] - 1)[:, None]] = np.inf
        gear = (v_kmh[:, None] >= up_at).sum(axis=1)
        rpm = v_kmh * ratios[np.arange(gear.shape[0]), gear]
        cold = np.clip((60.0 - coolant) / 40.0, 0.0, 1.0)
        idle = self.idle[t] + (self.fast_idle[t] - self.idle[t]) * cold
        idling = rpm < idle
        rpm = np.where(idling, idle, rpm) + rng.normal(0.0, 8.0, rpm.shape[0])
        return np.rint(rpm), np.where(idling, -1, gear)


def stop_allowance(gap: np.ndarray, v: np.ndarray, v_end: np.ndarray, dt: float) -> np.ndarray:
    """The highest speed at the end of this step from which the vehicle can still slow to
    `v_end` within `gap` metres at B_PLAN (this step's distance counted)."""
    room = gap - v * dt / 2 + v_end**2 / (2 * B_PLAN)
    b = B_PLAN
    return np.where(
        room > 0, b * (-dt / 2 + np.sqrt(dt * dt / 4 + 2 * np.maximum(room, 0.0) / b)), 0.0
    )


def next_speed(
    v: np.ndarray,
    cruise: np.ndarray,
    allowance: np.ndarray,
    accel_max: Num,
    v_max: Num,
    grade: np.ndarray,
    waiting: np.ndarray,
    dt: float,
    rng: np.random.Generator,
) -> np.ndarray:
    """Speed after one step (m/s): towards cruise, within the allowance, bounded accelerations."""
    reach = accel_max * np.maximum(1.0 - v / v_max, 0.15) - GRAVITY * np.maximum(grade, 0.0) * 0.5
    a = np.clip(CRUISE_GAIN * (cruise - v), -CRUISE_DECEL, np.maximum(reach, 0.2))
    moving = (v > 0.5) | (a > 0.2)
    a = a + np.where(moving, rng.normal(0.0, ACCEL_NOISE, v.shape[0]), 0.0)
    v_new = np.minimum(v + a * dt, allowance)
    v_new = np.maximum(v_new, v - B_MAX * dt)
    return np.where(waiting, 0.0, np.maximum(v_new, 0.0))


def engine_load(
    v: np.ndarray, accel: np.ndarray, grade: np.ndarray, accel_max: Num, v_max: Num
) -> np.ndarray:
    """0..1: a rough share of full power."""
    aero = 0.45 * (v / v_max) ** 2
    return np.clip(0.1 + aero + 0.5 * np.maximum(accel, 0.0) / accel_max + 8.0 * grade, 0.0, 1.0)


def coolant_step(
    coolant: np.ndarray, target: np.ndarray, load: np.ndarray, dt: float
) -> np.ndarray:
    warming = coolant < target - 3.0
    rate = (HEAT_IDLE + HEAT_LOAD * load) / 60.0 * dt
    tau = np.where(target > coolant, CLIMB_TAU_S, COOLANT_TAU_S)
    settle = coolant + (target - coolant) * (1.0 - np.exp(-dt / tau))
    return np.where(warming, coolant + rate, settle)


def coolant_target(
    thermostat: np.ndarray, load: np.ndarray, grade: np.ndarray, v_kmh: np.ndarray, climb_c: float
) -> np.ndarray:
    climb = climb_c * (np.maximum(grade, 0.0) / 0.05) * np.clip(v_kmh / 80.0, 0.3, 1.2)
    return thermostat + 3.0 * load + climb


def parked_coolant(at_park: np.ndarray, ambient: np.ndarray, parked_s: np.ndarray) -> np.ndarray:
    return ambient + (at_park - ambient) * np.exp(-parked_s / PARKED_TAU_S)


def oil_pressure(rpm: np.ndarray, coolant: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    cold = np.clip((80.0 - coolant) / 60.0, 0.0, 1.0)
    return 60.0 + 0.105 * rpm * (1.0 + 0.5 * cold) + rng.normal(0.0, 1.5, rpm.shape[0])


def fuel_burn_l(
    ds_m: np.ndarray,
    v: np.ndarray,
    accel: np.ndarray,
    grade: np.ndarray,
    per_100km: Num,
    idle_l_per_h: Num,
    dt: float,
) -> np.ndarray:
    """Litres burnt this step (never negative)."""
    factor = (
        0.7 + 0.3 * (v / 27.8) ** 2 + 0.4 * np.maximum(accel, 0.0) + 8.0 * np.maximum(grade, 0.0)
    )
    return per_100km / 100.0 * ds_m / 1000.0 * factor + idle_l_per_h / 3600.0 * dt


def battery_voltage(
    charging: np.ndarray, since_start_s: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    v = charging - (charging - CRANK_V) * np.exp(-np.maximum(since_start_s, 0.0) / CHARGE_TAU_S)
    return v + rng.normal(0.0, 0.02, v.shape[0])


def tyre_warmth(warm: np.ndarray, v_kmh: np.ndarray, dt: float) -> np.ndarray:
    """0 (ambient) .. 1 (hot): tyres warm within ~10 min of driving (more at speed) and cool
    slowly (~30 min), so slowing down from a motorway lowers pressure only gently."""
    target = np.where(v_kmh > 1.0, 0.6 + 0.4 * np.clip(v_kmh / 110.0, 0.0, 1.0), 0.3)
    tau = np.where(target > warm, TYRE_TAU_S, TYRE_COOL_TAU_S)
    return warm + (target - warm) * (1.0 - np.exp(-dt / tau))


def tyre_pressures(cold_kpa: np.ndarray, warm: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """(vehicles, 4) pressures in kPa."""
    hot = cold_kpa * (1.0 + TYRE_WARM_GAIN * warm)[:, None]
    return hot + rng.normal(0.0, 0.3, hot.shape)
