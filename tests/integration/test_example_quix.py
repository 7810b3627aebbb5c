"""The worked example of a job on another engine (`examples/quix_flatline`), run as its users
would: a seeded sensor fleet is simulated into a topic of this test's on the real broker, the
Quix Streams application runs in its own environment (`.venv-examples`, `make examples`) over
those readings and writes its alerts to a topic of its own, and `streamsim evaluate sensors
--alerts-topic` scores them against the run's truth."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest
import yaml

from core.config import StackConfig
from core.contracts import labels
from core.kafka.admin import ensure_topics
from tests.conftest import REPO_ROOT, streamsim_json

pytestmark = pytest.mark.integration
EXAMPLE = REPO_ROOT / "examples" / "quix_flatline"
PYTHON = REPO_ROOT / ".venv-examples" / "bin" / "python"


def test_the_quix_streams_example_is_scored_from_its_topic(
    kafka_stack: StackConfig, tmp_path: Path
) -> None:
    assert PYTHON.exists(), "the examples' environment is missing: run `make examples`"
    suffix = uuid.uuid4().hex[:8]
    readings_topic, alerts_topic = f"it-quix.readings-{suffix}", f"it-quix.alerts-{suffix}"
    bootstrap = kafka_stack.kafka.bootstrap_servers
    stack_file = tmp_path / "stack.yaml"
    stack_file.write_text(f"kafka:\n  bootstrap: {bootstrap}\ndirs:\n  data: {tmp_path / 'data'}\n")
    data = yaml.safe_load((REPO_ROOT / "config" / "scenarios" / "sensors.yaml").read_text())
    data.update(seed=11, run_id=f"it-{suffix}", entities=250, duration_s=600)
    data["domain"]["topic"] = readings_topic
    data["domain"]["faults"]["rate_per_hour"] = 0.5  # 10x the default: dozens of incidents
    scenario = tmp_path / "sensors.yaml"
    scenario.write_text(yaml.safe_dump(data))
    ensure_topics(kafka_stack, [readings_topic])
    prefix = streamsim_json(
        "simulate", str(scenario), "--speed", "max", "--config", str(stack_file)
    )["id_prefix"]

    # The job reads the topic from its start and stops once it has been idle for 3 s.
    job = subprocess.run(
        [
            str(PYTHON),
            str(EXAMPLE / "app.py"),
            *("--bootstrap", bootstrap),
            *("--readings-topic", readings_topic, "--alerts-topic", alerts_topic),
            *("--group", f"it-quix-{suffix}", "--state-dir", str(tmp_path / "state")),
            *("--idle-exit", "3"),
        ],
        capture_output=True,
        text=True,
        cwd=EXAMPLE,
        timeout=180,
        check=False,
    )
    assert job.returncode == 0, job.stderr[-4000:]

    report = streamsim_json(
        "evaluate", "sensors", "--alerts-topic", alerts_topic, "--config", str(stack_file)
    )
    assert report["run"]["id_prefix"] == prefix
    foreign = report["foreign"]
    assert foreign["source"] == f"topic {alerts_topic}"
    # Every alert the job wrote is in the contract and of this run; a replay would repeat ids.
    assert foreign["read"] == foreign["scored"] >= 5, foreign
    assert foreign["rejected"] == foreign["other_runs"] == foreign["repeated_alert_ids"] == 0
    scores = report["paths"]["foreign"]
    assert set(scores) == set(labels.SENSOR_FAULTS)
    stuck = scores["stuck_sensor"]
    assert stuck["detections"] == foreign["scored"] and stuck["support"] >= 5, stuck
    # A flat line is a stuck sensor's signature (seen: 1.0 each, 49 of 49). State kept on
    # another key than the sensor's mixes sensors' runs: recall 0.06 with the readings
    # regrouped by seq % 7, 0.898 by site (about one sensor a site here); alerts naming
    # events of no incident score precision near 0.
    assert stuck["precision"] >= 0.9 and stuck["incident_precision"] >= 0.9, stuck
    assert stuck["recall"] >= 0.9, stuck
    for label in ("spike", "silent_device"):
        assert scores[label]["detections"] == 0 and scores[label]["recall"] == 0.0
        assert scores[label]["support"] >= 1, (label, scores[label])  # in truth, not alerted
