"""`evaluate sensors` offline: the stuck-sensor, spike and silent-device rules' batch forms
over a seeded run of the shipped fleet (smaller), scored against its truth with the shared
scoring; and a detector that alerts on every reading scoring low."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pandas as pd
import pytest
import yaml

from core.contracts import labels
from scenarios.catalog import ScenarioConfig, run_scenario
from simulators.sinks import JsonlSink
from streamsim.evaluate import sensors
from streamsim.evaluate.scoring import Judge, score_path

FLEET = Path(__file__).parents[2] / "config" / "scenarios" / "sensors.yaml"


def _read(path: Path) -> pd.DataFrame:
    return pd.DataFrame.from_records([orjson.loads(line) for line in path.open("rb")])


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Seed 11 (in neither suite split: config/suites/sensors-*.yaml), 4,000 sensors for
    20 simulated minutes, at full speed: readings (each event once) and truth."""
    data = yaml.safe_load(FLEET.read_text())
    data.update(seed=11, entities=4000, duration_s=1200)
    out = tmp_path_factory.mktemp("sensors")
    run_scenario(ScenarioConfig.model_validate(data), JsonlSink(out), speed="max")
    readings = _read(out / "events.jsonl").drop_duplicates("event_id", ignore_index=True)
    return readings, _read(out / "truth.jsonl")


@pytest.fixture(scope="module")
def alerts(run: tuple[pd.DataFrame, pd.DataFrame]) -> pd.DataFrame:
    """The rules' alerts over the run, raised once for the module."""
    return sensors.run_rules(run[0])


def _score(detections: pd.DataFrame, truth: pd.DataFrame) -> dict[str, Any]:
    return score_path(
        detections,
        truth,
        list(labels.SENSOR_FAULTS),
        sensors.HORIZON_MS,
        None,
        sensors.RUNNING_MS,
    )


def test_the_rules_score_a_seeded_run(
    run: tuple[pd.DataFrame, pd.DataFrame], alerts: pd.DataFrame
) -> None:
    truth = run[1]
    scores = _score(sensors.alert_detections(alerts, truth), truth)
    stuck, spike = scores["stuck_sensor"], scores["spike"]
    assert stuck["support"] >= 20 and spike["support"] >= 15, scores
    # three identical readings are unmistakable; faults of one or two readings are missed
    assert stuck["incident_precision"] >= 0.95 and stuck["recall"] >= 0.8, stuck
    # a spike shows as a step in or out, even one already running at a sensor's first reading
    assert spike["incident_precision"] >= 0.95 and spike["recall"] >= 0.95, spike
    assert stuck["latency_ms"]["p50"] > 0 and spike["latency_ms"]["p50"] >= 0


def test_silences_are_found_and_clock_resets_are_no_silences(
    run: tuple[pd.DataFrame, pd.DataFrame], alerts: pd.DataFrame
) -> None:
    truth = run[1]
    silent = _score(sensors.alert_detections(alerts, truth), truth)["silent_device"]
    assert silent["support"] >= 10 and silent["recall"] >= 0.9, silent
    assert silent["precision"] >= 0.9 and silent["incident_precision"] >= 0.9, silent
    # A logger whose clock resets stamps its readings in 2000 for a while: in event time its
    # 2026 series has a hole, but its sequence numbers skip across it (it made readings).
    reset = set(
        truth.loc[(truth["event_time"] - truth["true_time"]).abs() > 86_400_000, "entity_id"]
    )
    assert len(reset) >= 5  # the run has resets to judge
    silences = alerts.query("label == 'silent_device'")
    judge = Judge(truth)
    hit = silences["event_ids"].map(lambda ids: judge.hit("silent_device", ids) is not None)
    assert hit[silences["entity_id"].isin(reset)].all(), silences[~hit]


def test_alerting_on_every_reading_scores_low(run: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    readings, truth = run
    everything = pd.concat(
        [
            pd.DataFrame(
                {
                    "label": label,
                    "event_ids": [[e] for e in readings["event_id"]],
                    "detected_sim_ms": 0.0,
                }
            )
            for label in labels.SENSOR_FAULTS
        ],
        ignore_index=True,
    )
    scores = _score(everything, truth)
    for label, figures in scores.items():
        assert figures["recall"] == 1.0, (label, figures)  # it does hit every incident ...
        assert figures["incident_precision"] < 0.01, (label, figures)  # ... among all else
        assert figures["precision"] < 0.05 and figures["f1"] < 0.02, (label, figures)
