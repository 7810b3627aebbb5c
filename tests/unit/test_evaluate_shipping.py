"""Scoring the shipping rules (`streamsim.evaluate.shipping` + `scoring`) on a small seeded run:
real rules find the injected incidents, a detector alerting on everything scores low, and
detection times follow arrivals (a voyage's readings land days late)."""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
import pandas as pd
import pytest

from core.contracts import labels, topics
from detectors.alert import Alert
from scenarios.catalog import ScenarioConfig, run_scenario
from simulators.sinks import JsonlSink
from streamsim.evaluate.scoring import (
    hard_negative_alerts,
    hard_negative_alerts_by_label,
    score_path,
)
from streamsim.evaluate.shipping import (
    HORIZON_MS,
    RUNNING_MS,
    TOPIC_COLUMNS,
    detections,
    first_arrivals,
    frame_of,
    run_rules,
)
from tests.shipping_run import small_shipping

KINDS = list(labels.SHIPPING_FAULTS)
SCHEMA_TOPIC = {
    "shipping.container/1": topics.SHIPPING_CONTAINERS.name,
    "shipping.position/1": topics.SHIPPING_POSITIONS.name,
    "shipping.port-event/1": topics.SHIPPING_PORT_EVENTS.name,
}
POSITIONS = topics.SHIPPING_POSITIONS.name


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, pd.DataFrame], pd.DataFrame]:
    """A small seeded run (`tests.shipping_run`), as JSONL."""
    data = small_shipping("unit")
    out = tmp_path_factory.mktemp("ship")
    run_scenario(ScenarioConfig.model_validate(data), JsonlSink(out), speed="max")
    events = [orjson.loads(line) for line in (out / "events.jsonl").open("rb")]
    truth = pd.DataFrame([orjson.loads(line) for line in (out / "truth.jsonl").open("rb")])
    frames = {
        topic: frame_of([e for e in events if SCHEMA_TOPIC[e["schema"]] == topic], columns)
        for topic, columns in TOPIC_COLUMNS.items()
    }
    return frames, truth


def _rules(frames: dict[str, pd.DataFrame], truth: pd.DataFrame) -> pd.DataFrame:
    return detections(run_rules(*frames.values()), frames[POSITIONS], truth)


def test_the_rules_find_the_injected_incidents(
    run: tuple[dict[str, pd.DataFrame], pd.DataFrame],
) -> None:
    frames, truth = run
    found = _rules(frames, truth)
    scores = score_path(
        found, truth, KINDS, HORIZON_MS, first_arrivals(truth), running_ms=RUNNING_MS
    )
    assert scores["route_deviation"]["open"] >= 1  # the seed ends with a ship sailing off
    supported = [k for k, f in scores.items() if f["support"] > 0]
    assert {"reefer_failure", "door_tamper", "missed_unload"} <= set(supported)
    for kind in supported:
        f = scores[kind]
        assert f["recall"] >= 0.9 and f["incident_precision"] >= 0.9, (kind, f)
        # detected no earlier than the incident began, nor than its data first landed
        assert f["latency_ms"]["p50"] >= 0 and f["latency_from_upload_ms"]["p50"] >= 0
    assert hard_negative_alerts(found, truth) == 0


def test_a_detector_alerting_on_everything_scores_low(
    run: tuple[dict[str, pd.DataFrame], pd.DataFrame],
) -> None:
    frames, truth = run
    every = [e for frame in frames.values() for e in frame["event_id"]]
    # every event alerted on alone, under every label: each incident hit, buried in noise
    noisy = pd.DataFrame(
        {
            "label": [k for k in KINDS for _ in every],
            "event_ids": [[e] for _ in KINDS for e in every],
            "detected_sim_ms": np.nan,
        }
    )
    scores = score_path(noisy, truth, KINDS)
    for kind, f in scores.items():
        if f["support"]:
            assert f["recall"] == 1.0
            assert f["precision"] < 0.1 and f["incident_precision"] < 0.01, (kind, f)
            assert f["f1"] < 0.05
    # one giant alert per label naming everything hits nothing
    giant = pd.DataFrame({"label": KINDS, "event_ids": [every] * len(KINDS), "detected_sim_ms": 0})
    for f in score_path(giant, truth, KINDS).values():
        assert f["recall"] == 0.0 and f["precision"] == 0.0
    assert hard_negative_alerts(giant, truth) == len(KINDS)
    assert hard_negative_alerts_by_label(giant, truth) == dict.fromkeys(KINDS, 1)


def _alert(rule: str, ids: tuple[str, ...], event_time: int, **evidence: Any) -> Alert:
    return Alert(rule, "BBSU0000001", event_time, ids, evidence, f"{rule}-{ids[0]}", rule)


def test_detection_waits_for_the_evidence_to_land() -> None:
    truth = pd.DataFrame(
        {
            "event_id": ["b1", "b2", "p1", "p2", "p3"],
            "emit_time": [9_000, 9_500, 9_800, 20_000, 15_000],
        }
    )
    positions = pd.DataFrame(
        {"event_id": ["p1", "p2", "p3"], "ship_id": "IMO1", "event_time": [1_000, 5_000, 7_000]}
    )
    alerts = [
        _alert("door_tamper", ("b1", "b2"), 2_000),  # landed at 9.5 s, after its event time
        _alert("reefer_failure", ("b1",), 12_000),  # its own moment is later than the arrival
        # silent since 2 s: the ship's positions from 4 s on show it; the first landed at 15 s
        _alert("lost_overboard", ("b1",), 4_000, ship_id="IMO1"),
        _alert("lost_overboard", ("b2",), 8_000, ship_id="IMO1"),  # no position after: never
        _alert("route_deviation", ("zz",), 1_000),  # unknown to truth
        _alert("door_tamper", ("b1", "b2"), 2_000),  # the same alert id again: once
    ]
    found = detections(alerts, positions, truth).set_index("alert_id")["detected_sim_ms"]
    assert len(found) == 5
    assert found["door_tamper-b1"] == 9_500
    assert found["reefer_failure-b1"] == 12_000
    assert found["lost_overboard-b1"] == 15_000
    assert np.isnan(found["lost_overboard-b2"]) and np.isnan(found["route_deviation-zz"])


def test_latency_from_upload_counts_from_the_first_arrival() -> None:
    truth = pd.DataFrame(
        {
            "event_id": ["a", "b", "n"],
            "true_time": [0, 1_000, 2_000],
            "emit_time": [50_000, 60_000, 2_100],  # held on board, flushed in port
            "label": ["door_tamper", "door_tamper", "none"],
            "incident_id": ["i", "i", None],
            "dropped": None,
            "duplicate_of": None,
        }
    )
    found = pd.DataFrame(
        {"label": ["door_tamper"], "event_ids": [["a", "b"]], "detected_sim_ms": [61_000.0]}
    )
    f = score_path(found, truth, ["door_tamper"], arrivals=first_arrivals(truth))["door_tamper"]
    assert f["latency_ms"] == {"p50": 61_000.0, "p99": 61_000.0}
    assert f["latency_from_upload_ms"] == {"p50": 11_000.0, "p99": 11_000.0}
    assert "latency_from_upload_ms" not in score_path(found, truth, ["door_tamper"])["door_tamper"]
