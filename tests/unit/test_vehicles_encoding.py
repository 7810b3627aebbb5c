"""Vehicle events as JSON: the same numbers as `%.Nf` would write, null positions in tunnels,
negative values, wide ranges, and no truth-only column in the event; plus determinism of the
whole stream (same seed, same bytes at any speed)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import orjson
import pytest

from scenarios.catalog import ScenarioConfig, run_scenario
from scenarios.vehicles.encoding import MAX_TABLE, VehicleEventEncoder
from scenarios.vehicles.scenario import HARD_NEGATIVE, PAYLOAD
from simulators.encoding import PayloadField
from simulators.entities import EntityTable
from simulators.records import row_dtype
from simulators.sinks import JsonlSink

SIGNED = ("lat", "lon", "coolant_c", "accel_long_ms2")


def encoder(fields: tuple[PayloadField, ...] = PAYLOAD) -> VehicleEventEncoder:
    cfg = ScenarioConfig.model_validate({"entities": 3})
    table = EntityTable.build(["veh-0", "veh-1", "veh-2"], cfg.classes, cfg.class_counts())
    return VehicleEventEncoder(
        "vehicle.telemetry/1", "vehicle_id", "cv-x-", table, fields, ("lat", "lon"), SIGNED
    )


def rows_with(n: int, rng: np.random.Generator) -> np.ndarray:
    rows = np.zeros(n, dtype=row_dtype([(f.name, f.dtype) for f in (*PAYLOAD, HARD_NEGATIVE)]))
    rows["gen"] = np.arange(n)
    rows["ent"] = rng.integers(0, 3, n)
    rows["event_ms"] = 1_772_524_800_000 + np.arange(n)
    for f in PAYLOAD:
        if f.kind == "float":
            rows[f.name] = rng.uniform(-50 if f.name in SIGNED else 0, 400, n)
        elif f.kind == "enum":
            rows[f.name] = rng.integers(0, len(f.choices), n)
        else:
            rows[f.name] = rng.integers(0, 5000, n)
    rows["odometer_km"] = rng.uniform(0, 900_000, n)  # too wide for a table
    rows["hard_negative"] = 2
    return rows


def test_numbers_read_back_as_the_values_rounded() -> None:
    rows = rows_with(5000, np.random.default_rng(1))
    rows["lat"][::7] = np.nan
    rows["lon"][::7] = np.nan
    events = [orjson.loads(e) for e in encoder().encode(rows)]
    assert "hard_negative" not in events[0]
    for f in PAYLOAD:
        if f.kind != "float":
            continue
        got = np.array([np.nan if e[f.name] is None else e[f.name] for e in events], dtype=float)
        want = rows[f.name] if f.name in SIGNED else np.maximum(rows[f.name], 0)
        ok = ~np.isnan(want)
        assert np.allclose(got[ok], want[ok], atol=0.5 * 10**-f.decimals + 1e-9), f.name
        assert np.isnan(got[~ok]).all()
    texts = encoder().encode(rows[:1])[0]
    assert b'"lat":null,"lon":null' in texts


def test_texts_match_fixed_decimal_formatting_including_signs() -> None:
    values = np.array([0.0, 0.04, -0.04, 12.345, -7.5, 399.99, 1e-9, -1e-9])
    rows = rows_with(len(values), np.random.default_rng(2))
    rows["coolant_c"] = values
    rows["accel_long_ms2"] = values
    events = encoder().encode(rows)
    for text, value in zip(events, values, strict=True):
        coolant = text.split(b'"coolant_c":')[1].split(b",")[0]
        accel = text.split(b'"accel_long_ms2":')[1].split(b"}")[0]
        assert float(coolant) == pytest.approx(value, abs=0.051)
        assert float(accel) == pytest.approx(value, abs=0.0051)


def test_a_field_whose_range_outgrows_the_table_falls_back_to_integers() -> None:
    rows = rows_with(100, np.random.default_rng(3))
    enc = encoder()
    rows["speed_kmh"] = np.linspace(0, 250, 100)
    enc.encode(rows)
    rows["speed_kmh"] = np.linspace(0, 10 * MAX_TABLE, 100)  # the table would be too big
    speeds = [orjson.loads(e)["speed_kmh"] for e in enc.encode(rows)]
    assert np.allclose(speeds, rows["speed_kmh"], atol=0.051)


def config(seed: int = 11) -> ScenarioConfig:
    return ScenarioConfig.model_validate(
        {
            "seed": seed,
            "entities": 40,
            "duration_s": 90,
            "start": "2026-03-03T07:00:00Z",
            "clock": {"offset_s": {"type": "uniform", "low": -60, "high": 60}},
            "delivery": {
                "outages": {"rate_per_hour": 20, "duration_s": 15, "flush_duplicates": 0.1},
                "duplicates": {"probability": 0.01},
            },
            "domain": {"type": "vehicles", "faults": {"rate_per_hour": {"gps_jump": 30}}},
        }
    )


def digest(directory: Path) -> str:
    h = hashlib.sha256()
    for name in ("events.jsonl", "truth.jsonl"):
        h.update((directory / name).read_bytes())
    return h.hexdigest()


def test_same_seed_same_stream_at_any_speed_and_another_seed_differs(tmp_path: Path) -> None:
    run_scenario(config(), JsonlSink(tmp_path / "max"), speed="max")
    run_scenario(config(), JsonlSink(tmp_path / "paced"), speed=300.0)  # 90 s in 0.3 s
    run_scenario(config(12), JsonlSink(tmp_path / "other"), speed="max")
    assert digest(tmp_path / "max") == digest(tmp_path / "paced")
    assert digest(tmp_path / "other") != digest(tmp_path / "max")
    lines = (tmp_path / "max" / "events.jsonl").read_bytes().splitlines()
    assert len(lines) > 1000 and all(orjson.loads(line)["schema"] for line in lines[:50])
