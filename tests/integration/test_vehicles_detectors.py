"""Detector smoke check on a vehicles run: the thresholds proposed in
docs/vehicles.md find the injected faults (precision, recall over incidents not cut
short by the run or the trip), and the hard negatives do fool a naive coolant trend.

Runs the detectors' vectorised forms per vehicle over 200 vehicles x 60 simulated minutes with
fault rates raised to 0.5 per driving hour. Prints the figures (-s to see them).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pandas as pd
import pytest

from detectors import (
    BrakingParams,
    FlatlineParams,
    SpeedingParams,
    ThresholdParams,
    TrendParams,
    braking_alerts,
    flatline_alerts,
    gps_jump_alerts,
    speeding_alerts,
    threshold_alerts,
    trend_alerts,
)
from scenarios.catalog import ScenarioConfig, run_scenario
from scenarios.vehicles.config import HARD_NEGATIVES, TYRES, VEHICLE_FAULTS
from simulators.sinks import MemorySink
from streamsim.config.kinds import load_file
from streamsim.evaluate.scoring import hard_negative_alerts, score_path

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
STUCK = ["coolant_c", "oil_pressure_kpa", "battery_v", *TYRES]

Detector = Callable[[pd.DataFrame], pd.DataFrame]


def _all(frames: list[pd.DataFrame]) -> pd.DataFrame:
    return pd.concat([f for f in frames if len(f)], ignore_index=True)


PROPOSED: dict[str, Detector] = {
    "overheating": lambda ev: threshold_alerts(
        ev, "coolant_c", ThresholdParams(above=105, min_duration_s=60)
    ),
    "tyre_leak": lambda ev: _all(
        [
            trend_alerts(
                ev,
                tyre,
                TrendParams(falling_below=-0.8, window_s=600, min_span_s=480, min_points=240),
            )
            for tyre in TYRES
        ]
    ),
    "stuck_sensor": lambda ev: _all(
        [flatline_alerts(ev, s, FlatlineParams(min_duration_s=120)) for s in STUCK]
    ),
    "gps_jump": lambda ev: gps_jump_alerts(ev),
    "harsh_braking": lambda ev: braking_alerts(
        ev, BrakingParams(decel_ms2=6, min_events=2, window_s=300)
    ),
    "speeding": lambda ev: speeding_alerts(ev, SpeedingParams(tolerance=0.2, min_duration_s=60)),
    "battery_failure": lambda ev: threshold_alerts(
        ev, "battery_v", ThresholdParams(below=12.5, min_duration_s=30)
    ),
}
#: Types known to miss issue 12's recall target of 0.85 here, each with why. An entry that
#: starts passing fails the test too: remove it then.
BELOW_RECALL_TARGET = {
    # 43db8d8 draws speeding at +10% to +55% over the limit; a 0.2 tolerance cannot see the
    # +10..20% part (0.7 measured). Choosing the tolerance belongs to the tuning split, against
    # normal driving up to ~+14.5% and brief speeding, not to this check.
    "speeding": "tolerance 0.2 vs injected margins from +10%",
}

NAIVE_COOLANT_TREND: Detector = lambda ev: trend_alerts(  # noqa: E731
    ev, "coolant_c", TrendParams(rising_above=2.0, window_s=300, min_span_s=240, min_points=120)
)


@pytest.fixture(scope="module")
def stream() -> tuple[pd.DataFrame, pd.DataFrame]:
    _, example = load_file(REPO / "config" / "scenarios" / "vehicles.yaml")
    assert isinstance(example, ScenarioConfig)
    data = example.model_dump(mode="json")
    data.update(entities=200, duration_s=3600, seed=8, start="2026-03-03T06:30:00Z")
    data["domain"]["faults"]["rate_per_hour"] = {k: 0.5 for k in VEHICLE_FAULTS}
    sink = MemorySink()
    run_scenario(ScenarioConfig.model_validate(data), sink, speed="max")
    events = pd.DataFrame([orjson.loads(v) for v in sink.events.values])
    truth = pd.DataFrame([orjson.loads(v) for v in sink.truth.values])
    return events.rename(columns={"vehicle_id": "entity_id"}), truth


def complete_incidents(events: pd.DataFrame, truth: pd.DataFrame) -> pd.DataFrame:
    """Incidents whose vehicle reported again on the same trip after their last reading."""
    sent = truth[truth["dropped"].isna() & truth["duplicate_of"].isna()]
    sent = sent.merge(events[["event_id", "trip_id"]].drop_duplicates("event_id"), on="event_id")
    trip_end = sent.groupby(["entity_id", "trip_id"])["true_time"].max().rename("trip_end")
    labelled = sent[sent["label"] != "none"]
    incidents = labelled.groupby("incident_id").agg(
        label=("label", "first"),
        end=("true_time", "max"),
        entity_id=("entity_id", "first"),
        trip_id=("trip_id", "last"),
    )
    incidents = incidents.join(trip_end, on=["entity_id", "trip_id"])
    return incidents[incidents["end"] < incidents["trip_end"]]


def detections(alerts: pd.DataFrame, label: str) -> pd.DataFrame:
    return pd.DataFrame(
        {"label": label, "event_ids": alerts["event_ids"], "detected_sim_ms": np.nan}
    )


def test_proposed_thresholds_find_the_faults(stream: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    events, truth = stream
    complete = complete_incidents(events, truth)
    labelled = truth.dropna(subset=["incident_id"]).drop_duplicates("event_id")
    figures: dict[str, dict[str, Any]] = {}
    for label, detector in PROPOSED.items():
        found = detections(detector(events), label)
        score = score_path(found, truth, [label])[label]
        mine_events = labelled[labelled["label"] == label]
        incident_of = dict(zip(mine_events["event_id"], mine_events["incident_id"], strict=True))
        hit = {incident_of.get(e) for ids in found["event_ids"] for e in ids}
        mine = complete[complete["label"] == label]
        recall_complete = float(np.mean([i in hit for i in mine.index]))
        figures[label] = {
            **score,
            "recall_complete": round(recall_complete, 3),
            "complete": len(mine),
            "hard_negative_alerts": hard_negative_alerts(found, truth),
        }
        print(label, figures[label])
    below_target = set()
    for label, f in figures.items():
        assert f["support"] >= 10 and f["complete"] >= 5, label
        assert f["precision"] >= 0.9, label
        if f["recall_complete"] < 0.85:
            below_target.add(label)
    assert below_target == set(BELOW_RECALL_TARGET), figures


def test_cold_starts_and_climbs_fool_a_naive_coolant_trend(
    stream: tuple[pd.DataFrame, pd.DataFrame],
) -> None:
    events, truth = stream
    naive = detections(NAIVE_COOLANT_TREND(events), "overheating")
    level = detections(PROPOSED["overheating"](events), "overheating")
    fooled = hard_negative_alerts(naive, truth)
    print("coolant trend alone:", score_path(naive, truth, ["overheating"]), "hard neg", fooled)
    assert fooled >= 10 and hard_negative_alerts(level, truth) == 0
    marked = set(truth.loc[truth["hard_negative"].notna(), "hard_negative"])
    assert marked == set(HARD_NEGATIVES)
