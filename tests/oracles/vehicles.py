"""The vehicle job's hand-made readings (their cases and phases:
`tests/integration/test_pipeline_vehicles.py`), the faults planted in them, and the detectors'
vectorised forms over the on-time ones."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping
from typing import Any

import orjson
import pandas as pd

from pipeline.jobs.vehicles.rules import VehicleDetector, vehicle_alerts_batch

T0 = 1_772_524_800_000  # 2026-03-03T08:00:00Z, a whole minute
STEP_S = 2
MINUTES = 12
Reading = dict[str, Any]


def series(vehicle: str, tweak: Callable[[int, Reading], None] | None = None) -> list[Reading]:
    """12 minutes of normal driving every 2 s (signals jitter: nothing is flat), tweaked."""
    rows = []
    for i in range(MINUTES * 60 // STEP_S):
        second = i * STEP_S
        row: Reading = {
            "schema": "vehicle.telemetry/1",
            "event_id": f"{vehicle}-{second:05d}",
            "vehicle_id": vehicle,
            "event_time": T0 + second * 1000,
            "seq": i,
            "trip_id": 10_001,
            "road_class": "rural",
            "speed_limit_kmh": 100.0,
            "lat": 48.0 + 0.0004 * i,
            "lon": 9.0,
            "speed_kmh": 80.0 + 0.3 * (i % 3),
            "heading_deg": 0.0,
            "odometer_km": round(1000.0 + 0.0444 * i, 4),
            "rpm": 2000.0 + 10 * (i % 4),
            "coolant_c": 90.0 + 0.1 * (i % 3),
            "oil_pressure_kpa": 300.0 + (i % 5),
            "fuel_pct": 60.0 - 0.001 * i,
            "battery_v": 14.0 + 0.01 * (i % 3),
            "tyre_fl_kpa": 240.0 + 0.1 * (i % 2),
            "tyre_fr_kpa": 241.0 + 0.1 * (i % 2),
            "tyre_rl_kpa": 239.0 + 0.1 * (i % 2),
            "tyre_rr_kpa": 238.0 + 0.1 * (i % 2),
            "accel_long_ms2": 0.05 * ((i % 3) - 1),
        }
        if tweak is not None:
            tweak(second, row)
        rows.append(row)
    return rows


def during(start_s: int, end_s: int, **values: Any) -> Callable[[int, Reading], None]:
    def tweak(second: int, row: Reading) -> None:
        if start_s <= second < end_s:
            row.update(values)

    return tweak


def tyre_leak(second: int, row: Reading) -> None:
    row["tyre_rr_kpa"] = 238.0 - 1.5 * second / 60.0 + 0.05 * (second // 2 % 2)


def stuck(second: int, row: Reading) -> None:
    if 200 <= second < 350:
        row["oil_pressure_kpa"] = 312.5


def gps_jump(second: int, row: Reading) -> None:
    if second == 300:
        row["lat"] += 0.18  # 20 km north, 2 s after the last fix


def braking(second: int, row: Reading) -> None:
    if second in (612, 648):
        row["accel_long_ms2"] = -7.5


def hill(second: int, row: Reading) -> None:
    if 300 <= second < 420:
        row["coolant_c"] += 6.0 * math.sin(math.pi * (second - 300) / 120)


def cold_start(second: int, row: Reading) -> None:
    row["coolant_c"] = min(20.0 + 6.0 * second / 60.0, 70.0 + 0.1 * (second // 2 % 3))


def tunnel(second: int, row: Reading) -> None:
    if 300 <= second < 380:
        row["lat"] = row["lon"] = None


FAULTS: dict[str, tuple[Callable[[int, Reading], None], set[tuple[str, str]]]] = {
    "veh-overheat": (during(200, 290, coolant_c=110.0), {("threshold", "overheating")}),
    "veh-battery": (
        during(300, 360, battery_v=12.0),
        {("threshold", "battery_failure"), ("zscore", "battery_failure")},
    ),
    "veh-tyre": (tyre_leak, {("trend", "tyre_leak")}),
    "veh-stuck": (stuck, {("flatline", "stuck_sensor")}),
    "veh-gps": (gps_jump, {("gps_jump", "gps_jump")}),
    "veh-brake": (braking, {("harsh_braking", "harsh_braking")}),
    "veh-speed": (during(100, 190, speed_kmh=130.0), {("speeding", "speeding")}),
}
HARD_NEGATIVES = {"veh-hill": hill, "veh-cold": cold_start, "veh-tunnel": tunnel}
MALFORMED = [("bad", b"{not json"), ("bad", orjson.dumps({"event_id": "x", "event_time": T0}))]


def late_block() -> list[Reading]:
    """`veh-late` overheating at minutes 2-5: sent after the watermark passed minute 10."""
    rows = series("veh-late", during(150, 240, coolant_c=111.0))
    return [r for r in rows if 120_000 <= r["event_time"] - T0 < 300_000]


def phases() -> tuple[list[Reading], list[Reading], list[Reading], list[Reading]]:
    rng = random.Random(5)
    phase_1: list[Reading] = []
    held: list[Reading] = []
    for vehicle, (tweak, _) in FAULTS.items():
        rows = series(vehicle, tweak)
        if vehicle == "veh-overheat":
            rows = rows[:]
            rng.shuffle(rows)
            rows += rows[10:15]  # duplicates, in the same phase
        if vehicle == "veh-brake":
            held = [r for r in rows if 600_000 < r["event_time"] - T0 <= 660_000]
            rows = [r for r in rows if r not in held]
        phase_1 += rows
    for vehicle, tweak in HARD_NEGATIVES.items():
        phase_1 += series(vehicle, tweak)
    resent = [
        r for r in series("veh-speed", FAULTS["veh-speed"][0]) if r["event_time"] > T0 + 640_000
    ]
    phase_2 = held[::-1] + resent
    clock = [{**series("veh-clock")[0], "event_id": "clock-1", "event_time": T0 + 3_600_000}]
    return phase_1, phase_2, late_block(), clock


def as_records(rows: list[Reading]) -> list[tuple[str, bytes]]:
    return [(r["vehicle_id"], orjson.dumps(r)) for r in rows]


def on_time() -> list[Reading]:
    """Every reading but the late block: phases 1 and 2, and the clock reading."""
    phase_1, phase_2, _, clock = phases()
    return phase_1 + phase_2 + clock


def oracle_alerts(detectors: Mapping[str, VehicleDetector]) -> pd.DataFrame:
    """The detectors' vectorised forms over the on-time readings (none is late to them)."""
    return vehicle_alerts_batch(pd.DataFrame(on_time()), detectors)
