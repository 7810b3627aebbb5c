"""Device clocks: offset, drift, jumps and resets to an epoch, as a device would stamp them."""

from __future__ import annotations

from typing import Any

import numpy as np

from scenarios.catalog import ScenarioConfig
from simulators.clock import DeviceClocks
from simulators.entities import EntityTable

START = 1_767_225_600_000  # 2026-01-01T00:00:00Z
EPOCH_2000 = 946_684_800_000


def clocks_for(n: int, **clock: Any) -> DeviceClocks:
    cfg = ScenarioConfig.model_validate({"entities": n, "clock": clock})
    table = EntityTable.build([f"d{i}" for i in range(n)], cfg.classes, cfg.class_counts())
    return DeviceClocks(table, np.random.default_rng(7), START)


QUIET = {"offset_s": 0, "drift_ppm": 0}


def test_constant_offset_and_drift() -> None:
    clocks = clocks_for(2, offset_s=1.5, drift_ppm=100)
    ent = np.array([0, 1, 0])
    true = np.array([START, START, START + 3_600_000])
    # 1.5 s offset, plus 100 ppm of an hour = 360 ms
    assert clocks.stamp(ent, true).tolist() == [START + 1500, START + 1500, START + 3_601_860]


def test_offsets_follow_the_configured_distribution() -> None:
    clocks = clocks_for(20_000, offset_s={"type": "normal", "mean": 2, "std": 0.5}, drift_ppm=0)
    assert abs(clocks.offset_ms.mean() - 2000) < 20 and abs(clocks.offset_ms.std() - 500) < 20


def test_jumps_accumulate_and_persist() -> None:
    clocks = clocks_for(1, **QUIET, jumps={"probability": 1.0, "size_s": 2})
    ent = np.zeros(3, dtype=np.int32)
    true = START + np.array([0, 1000, 2000])
    assert (clocks.stamp(ent, true) - true).tolist() == [2000, 4000, 6000]
    assert (clocks.stamp(ent[:1], true[:1] + 3000) - true[:1] - 3000).tolist() == [8000]


def test_reset_reads_the_epoch_then_resyncs() -> None:
    clocks = clocks_for(1, **QUIET, resets={"probability": 1.0, "duration_s": 10})
    true = START + np.array([0])
    assert clocks.stamp(np.zeros(1, dtype=np.int32), true).tolist() == [EPOCH_2000]
    clocks._p_reset[:] = 0.0  # no more resets: the clock runs on from the epoch, then resyncs
    later = START + np.array([4000, 9999, 10_000, 20_000])
    stamped = clocks.stamp(np.zeros(4, dtype=np.int32), later)
    assert stamped.tolist() == [
        EPOCH_2000 + 4000,
        EPOCH_2000 + 9999,
        START + 10_000,
        START + 20_000,
    ]


def test_a_jump_affects_only_its_device_and_later_readings() -> None:
    cfg = ScenarioConfig.model_validate(
        {
            "entities": 2,
            "clock": QUIET,
            "classes": [
                {"name": "jumpy", "clock": {"jumps": {"probability": 1.0, "size_s": 1}}},
                {"name": "steady"},
            ],
        }
    )
    table = EntityTable.build(["a", "b"], cfg.classes, cfg.class_counts())
    clocks = DeviceClocks(table, np.random.default_rng(7), START)
    ent = np.array([1, 0, 1, 0], dtype=np.int32)
    true = START + np.array([0, 10, 20, 30])
    assert (clocks.stamp(ent, true) - true).tolist() == [0, 1000, 0, 2000]
