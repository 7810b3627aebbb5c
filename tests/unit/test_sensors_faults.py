"""The sensor fleet's faults: lengths per fault type (`faults.duration_s_by_kind`) and the
silent device (no readings while it lasts; truth labels the reading that ends the gap)."""

from __future__ import annotations

import itertools
from collections import defaultdict
from typing import Any

import numpy as np
import orjson
import pytest

from scenarios.catalog import ScenarioConfig, run_scenario
from scenarios.sensors.config import SensorFaults
from simulators.distributions import Constant, Exponential
from simulators.intervals import IntervalSchedule
from simulators.sinks import MemorySink

START = 1_767_225_600_000
#: A quiet fleet: exact clocks, no delivery faults; readings every 2 s; many faults.
QUIET: dict[str, Any] = {
    "entities": 40,
    "duration_s": 600,
    "seed": 9,
    "clock": {"offset_s": 0, "drift_ppm": 0},
    "delivery": {"delay_s": 0},
    "domain": {
        "type": "sensors",
        "interval_s": 2,
        "jitter_s": 0.1,
        "faults": {
            "rate_per_hour": 20,
            "duration_s": 10,
            "duration_s_by_kind": {"silent_device": 30},
            "mix": {"stuck_sensor": 0.5, "silent_device": 0.5},
        },
    },
}


def test_episodes_take_their_kinds_own_length() -> None:
    s = IntervalSchedule(
        np.full(500, 30.0),
        np.zeros(500, dtype=np.int16),
        [Exponential(mean=50.0)],
        np.random.default_rng(4),
        START,
        kinds=np.array([0.5, 0.5]),
        kind_durations=[Constant(value=10.0), Constant(value=100.0)],
    )
    length = s.end - s.start
    assert set(length[s.kind == 0]) == {10_000.0} and set(length[s.kind == 1]) == {100_000.0}


def test_a_kind_without_its_own_length_takes_the_shared_one() -> None:
    faults = SensorFaults.model_validate(
        {"duration_s": 7, "duration_s_by_kind": {"stuck_sensor": 3600}}
    )
    assert faults.duration_of("stuck_sensor") == Constant(value=3600.0)
    assert faults.duration_of("spike") == faults.duration_of("silent_device") == Constant(value=7)


@pytest.fixture(scope="module")
def quiet_run() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    sink = MemorySink()
    run_scenario(ScenarioConfig.model_validate(QUIET), sink, speed="max")
    events = [orjson.loads(v) for v in sink.events.values]
    return events, [orjson.loads(v) for v in sink.truth.values]


def test_the_same_seed_gives_the_same_stream(quiet_run: Any) -> None:
    sink = MemorySink()
    run_scenario(ScenarioConfig.model_validate(QUIET), sink, speed="max")
    assert [orjson.loads(v) for v in sink.events.values] == quiet_run[0]


def test_stuck_faults_last_their_own_length(quiet_run: Any) -> None:
    _, truth = quiet_run
    spans: dict[str, list[int]] = defaultdict(list)
    for t in truth:
        if t["label"] == "stuck_sensor":
            spans[t["incident_id"]].append(t["true_time"])
    assert len(spans) >= 10
    assert max(max(s) - min(s) for s in spans.values()) <= 10_000  # 10 s, not silent's 30 s


def test_a_silent_device_makes_nothing_and_labels_the_reading_after(quiet_run: Any) -> None:
    _, truth = quiet_run
    times: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for t in truth:  # every reading made, sent or not
        times[t["entity_id"]].append((t["true_time"], t["label"]))
    silent_gaps, other_gaps = [], []
    for series in times.values():
        series.sort()
        for (t0, _), (t1, label) in itertools.pairwise(series):
            (silent_gaps if label == "silent_device" else other_gaps).append(t1 - t0)
    assert len(silent_gaps) >= 10
    assert min(silent_gaps) >= 30_000 - 2_200  # the silence, less an interval and jitter
    assert max(other_gaps) <= 2_200  # elsewhere every 2 s: nothing else is missing
    labelled = [t for t in truth if t["label"] == "silent_device"]
    assert len({t["incident_id"] for t in labelled}) == len(labelled)  # one reading each
