"""Sensor fleet against a real broker, as users run it: `streamsim simulate` a seeded fleet
to Kafka, then `streamsim evaluate sensors --json` scores the stuck-sensor and spike
rules' batch forms over the run's readings against its truth topic."""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path

import orjson
import pytest
import yaml

from core.config import StackConfig
from core.contracts import labels, topics
from streamsim.verify.readers import consume_topic
from tests.conftest import REPO_ROOT, streamsim_json

pytestmark = pytest.mark.integration


def test_simulate_then_evaluate_sensors(kafka_stack: StackConfig, tmp_path: Path) -> None:
    stack_file = tmp_path / "stack.yaml"
    stack_file.write_text(
        f"kafka:\n  bootstrap: {kafka_stack.kafka.bootstrap_servers}\n"
        f"dirs:\n  data: {tmp_path / 'data'}\n"
    )
    data = yaml.safe_load((REPO_ROOT / "config" / "scenarios" / "sensors.yaml").read_text())
    # a report seed, 15 simulated minutes; a run id of its own makes its event-id prefix
    # unique, so no other run of the seed in the session's topics is read as this one
    data.update(seed=12, run_id=f"it-{uuid.uuid4().hex[:8]}", entities=3000, duration_s=900)
    scenario = tmp_path / "sensors.yaml"
    scenario.write_text(yaml.safe_dump(data))
    sim = streamsim_json("simulate", str(scenario), "--speed", "max", "--config", str(stack_file))
    prefix = sim["id_prefix"]

    report = streamsim_json("evaluate", "sensors", "--config", str(stack_file))
    assert report["scenario"] == "sensors" and report["run"]["id_prefix"] == prefix
    assert report["pipeline_form"] == "batch" and set(report["paths"]) == {"pipeline"}
    scores = report["paths"]["pipeline"]
    assert set(scores) == set(labels.SENSOR_FAULTS)
    truth_topic = topics.truth("sensors").name
    truth = [
        t
        for t in map(orjson.loads, consume_topic(kafka_stack, truth_topic).values)
        if t["event_id"].startswith(prefix)
    ]
    injected = Counter(
        label for label, _ in {(t["label"], t["incident_id"]) for t in truth if t["incident_id"]}
    )
    for label in labels.SENSOR_FAULTS:
        figures = scores[label]
        assert figures["support"] >= 8, (label, figures)
        # every incident with a delivered reading is scored or open
        assert figures["support"] + figures["open"] <= injected[label], (label, figures)
        assert figures["hard_negative_alerts"] == 0
    stuck, spike = scores["stuck_sensor"], scores["spike"]
    assert stuck["incident_precision"] >= 0.9 and stuck["recall"] >= 0.6, stuck
    assert spike["incident_precision"] >= 0.5 and spike["recall"] >= 0.5, spike
    assert report["unknown_label_alerts"] == {"pipeline": {}}
    # the clock block: corrected time vs true time, records of devices not in a reset
    clock = report["clock"]
    assert clock["within_1s_share"] >= 0.95 and clock["p50_ms"] < 1000, clock
    assert set(clock["by_class"]) == {"smart_meter", "env_sensor", "legacy_logger"}
    assert all(c["within_1s_share"] >= 0.95 for c in clock["by_class"].values()), clock
    assert clock["by_state"]["steady"]["records"] == clock["records"]
    assert list((tmp_path / "data" / "evaluations").glob("sensors-*.json"))
