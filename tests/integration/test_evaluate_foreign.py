"""A job that is not ours, scored from its alerts topic against a real broker: a seeded sensor
fleet is simulated into a topic of this test's, a naive flat-line rule over those readings
(no truth read) writes alerts in the contract, with two malformed records and one of another
run, to a topic of its own, and `streamsim evaluate sensors --alerts-topic` scores them."""

from __future__ import annotations

import functools
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from confluent_kafka import KafkaError, Message, Producer

from core.config import StackConfig
from core.contracts import labels
from core.kafka.admin import ensure_topics
from core.kafka.clients import producer_config
from core.kafka.reader import read_topic
from tests.conftest import REPO_ROOT, streamsim_json

pytestmark = pytest.mark.integration


def flat_lines(readings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A naive rule: three readings in a row of one sensor (by sequence number) with the same
    temperature and humidity are a stuck sensor; one alert per flat run, naming those three."""
    by_sensor: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for r in readings:
        by_sensor[r["sensor_id"]][r["event_id"]] = r  # a duplicate delivery once
    alerts = []
    for sensor, unique in by_sensor.items():
        run: list[dict[str, Any]] = []
        for r in sorted(unique.values(), key=lambda r: r["seq"]):
            same = run and (r["temperature_c"], r["humidity_pct"]) == (
                run[-1]["temperature_c"],
                run[-1]["humidity_pct"],
            )
            run = [*run, r] if same else [r]
            if len(run) == 3:
                alerts.append(
                    {
                        "alert_id": f"flat-{run[0]['event_id']}",
                        "rule": "flat_line",
                        "label": "stuck_sensor",
                        "entity_id": sensor,
                        "event_time": r["event_time"],
                        "event_ids": [x["event_id"] for x in run],
                        "detected_at": int(time.time() * 1000),
                        "engine": "a plain Python loop",  # not a field: ignored
                    }
                )
    return alerts


def test_a_foreign_job_is_scored_from_its_topic(kafka_stack: StackConfig, tmp_path: Path) -> None:
    suffix = uuid.uuid4().hex[:8]
    readings_topic, alerts_topic = f"it-foreign.readings-{suffix}", f"it-foreign.alerts-{suffix}"
    stack_file = tmp_path / "stack.yaml"
    stack_file.write_text(
        f"kafka:\n  bootstrap: {kafka_stack.kafka.bootstrap_servers}\n"
        f"dirs:\n  data: {tmp_path / 'data'}\n"
    )
    data = yaml.safe_load((REPO_ROOT / "config" / "scenarios" / "sensors.yaml").read_text())
    data.update(seed=7, run_id=f"it-{suffix}", entities=400, duration_s=600)
    data["domain"]["topic"] = readings_topic
    data["domain"]["faults"]["rate_per_hour"] = 0.5  # 10x the default: dozens of incidents
    scenario = tmp_path / "sensors.yaml"
    scenario.write_text(yaml.safe_dump(data))
    prefix = streamsim_json(
        "simulate", str(scenario), "--speed", "max", "--config", str(stack_file)
    )["id_prefix"]

    readings = [r for r in read_topic(kafka_stack, readings_topic) if "sensor_id" in r]
    assert readings and all(r["event_id"].startswith(prefix) for r in readings)
    alerts = flat_lines(readings)
    assert len(alerts) >= 5
    ensure_topics(kafka_stack, [alerts_topic])
    failed: list[KafkaError] = []

    def delivered(err: KafkaError | None, _: Message) -> None:
        if err is not None:
            failed.append(err)

    producer = Producer(producer_config(kafka_stack))
    send = functools.partial(producer.produce, alerts_topic, on_delivery=delivered)
    for a in alerts:
        send(key=a["entity_id"], value=orjson.dumps(a))
    send(value=b'{"label": "stuck_sensor", "entity_id": ')
    send(value=orjson.dumps({**alerts[0], "event_ids": None}))
    send(value=orjson.dumps({**alerts[0], "event_ids": ["x-1"]}))  # no event of the run
    assert producer.flush(30) == 0 and failed == []

    report = streamsim_json(
        "evaluate", "sensors", "--alerts-topic", alerts_topic, "--config", str(stack_file)
    )
    assert report["run"]["id_prefix"] == prefix
    assert report["foreign"] == {
        "source": f"topic {alerts_topic}",
        "read": len(alerts) + 3,
        "scored": len(alerts),
        "rejected": 2,
        "rejected_by_reason": {"bad_json": 1, "missing_field:event_ids": 1},
        "other_runs": 1,
        "repeated_alert_ids": 0,
    }
    assert set(report["paths"]) == {"foreign"} and "parity" not in report
    scores = report["paths"]["foreign"]
    assert set(scores) == set(labels.SENSOR_FAULTS)
    stuck = scores["stuck_sensor"]
    assert stuck["detections"] == len(alerts) and stuck["support"] >= 5, stuck
    # a flat line is a stuck sensor's signature: a join on the wrong ids scores ~0 here
    assert stuck["precision"] >= 0.9 and stuck["incident_precision"] >= 0.9, stuck
    assert stuck["recall"] >= 0.6, stuck
    for label in ("spike", "silent_device"):
        assert scores[label]["detections"] == 0 and scores[label]["recall"] == 0.0
        assert scores[label]["support"] >= 3, (label, scores[label])
    assert report["hard_negative_alerts"] == stuck["hard_negative_alerts"]
