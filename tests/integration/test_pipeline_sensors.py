"""Real broker + real Spark: `sensors` with its sensor alerts on a seeded sensor fleet.

A small fleet (100 sensors, 8 simulated minutes, seed 9; faults 100 times as often as shipped
and batteries draining across the low mark) is simulated in process and its records, in
delivery order (outages, duplicates and all), go to a topic of the test's own; one reading two
hours on moves the watermark (1 hour: nothing is late) past them all. The job's stuck-sensor,
spike and silent-device alerts must be the batch evaluation's
(`streamsim.evaluate.sensors.run_rules`) over the same records, id for id, and low battery
alerts once per sensor that reported it (the battery only drains: one episode each), at its
first low reading.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import orjson
import pandas as pd
import pytest
import yaml
from confluent_kafka import Producer

from core.config import StackConfig
from core.kafka import ensure_topics, producer_config
from core.kafka.reader import read_topic
from pipeline.config import PipelineConfig
from pipeline.jobs.sensors import job
from scenarios.catalog import ScenarioConfig, run_scenario
from simulators.sinks import JsonlSink
from streamsim.evaluate import sensors

pytestmark = pytest.mark.integration

FLEET = Path(__file__).parents[2] / "config" / "scenarios" / "sensors.yaml"
HOUR_MS = 3_600_000


def fleet(out: Path) -> list[dict[str, Any]]:
    data = yaml.safe_load(FLEET.read_text())
    data.update(seed=9, entities=100, duration_s=480)
    data["domain"]["faults"]["rate_per_hour"] = 5.0
    data["domain"].update(battery_v={"type": "uniform", "low": 3.4, "high": 3.5})
    data["domain"]["battery_drain_v_per_day"] = 7.2  # about half cross 3.4 V
    run_scenario(ScenarioConfig.model_validate(data), JsonlSink(out), speed="max")
    return [orjson.loads(line) for line in (out / "events.jsonl").open("rb")]


def produce(stack: StackConfig, topic: str, rows: list[dict[str, Any]]) -> None:
    producer = Producer(producer_config(stack))
    for row in rows:
        producer.produce(topic, key=row["sensor_id"], value=orjson.dumps(row))
    assert producer.flush(30) == 0


@pytest.fixture(scope="module")
def run(
    kafka_stack: StackConfig, spark: Any, tmp_path_factory: pytest.TempPathFactory
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """(records sent, alerts, counts) of one run of the job over the fleet."""
    tag = uuid.uuid4().hex[:8]
    root = tmp_path_factory.mktemp("sensors-sensors")
    dirs = kafka_stack.dirs.model_copy(
        update={"checkpoints": root / "checkpoints", "lake": root / "lake"}
    )
    stack = kafka_stack.model_copy(update={"dirs": dirs})
    cfg = PipelineConfig.model_validate(
        {
            "job": "sensors",
            "input_topics": [f"sensors.readings-{tag}"],
            "output_topic": f"counts-{tag}",
            "deadletter_topic": f"deadletter-{tag}",
            "entity_key": "sensor_id",
            "watermark": "1 hour",
            "sensors": {"sensor_alerts": True, "alerts_topic": f"alerts-{tag}"},
        }
    )
    ensure_topics(stack, [*cfg.input_topics, cfg.output_topic, cfg.deadletter_topic], partitions=1)
    records = fleet(root / "fleet")
    last = max(records, key=lambda r: r["event_time"])
    clock = {**last, "event_id": f"clock-{tag}", "sensor_id": f"clock-{tag}"}
    clock["event_time"] = last["event_time"] + 2 * HOUR_MS
    queries = job.start(spark, stack, cfg)
    try:
        assert [q.name for q in queries][-1] == job.ALERTS_QUERY
        produce(stack, cfg.input_topics[0], [*records, clock])
        for _ in range(2):  # the data, then the batches after the watermark moved
            for query in queries:
                query.processAllAvailable()
    finally:
        for query in queries:
            query.stop()
    return (
        records,
        read_topic(stack, cfg.sensors.alerts_topic),
        read_topic(stack, cfg.output_topic),
    )


def test_fault_alerts_are_the_batch_evaluations(run: Any) -> None:
    records, alerts, _ = run
    readings = pd.DataFrame(records).drop_duplicates("event_id", ignore_index=True)
    oracle = sensors.run_rules(readings)
    expected = {(r.alert_id, r.label, tuple(r.event_ids)) for r in oracle.itertuples()}
    got = [(a["alert_id"], a["label"], tuple(a["event_ids"])) for a in alerts]
    assert {label for _, label, _ in expected} == {"stuck_sensor", "spike", "silent_device"}
    assert {g for g in got if g[1] != "low_battery"} == expected
    assert len(got) == len(set(got))  # each alert once, duplicates in the input or not
    assert {(a["source"], a["job"]) for a in alerts} == {("pipeline", job.NAME)}


def test_low_battery_alerts_once_per_sensor_at_its_first_low_reading(run: Any) -> None:
    records, alerts, _ = run
    low = (
        pd.DataFrame(records)
        .query("status == 'low_battery'")
        .sort_values(["event_time", "event_id"])
    )
    first = low.drop_duplicates("sensor_id").set_index("sensor_id")["event_id"].to_dict()
    got = [(a["entity_id"], a["event_ids"][0]) for a in alerts if a["label"] == "low_battery"]
    assert 10 <= len(first) < 100  # some sensors crossed the mark, not all
    assert sorted(got) == sorted(first.items())


def test_counts_still_count_every_record(run: Any) -> None:
    records, _, counts = run  # duplicates included: the counts query counts deliveries
    assert sum(c["events"] for c in counts) == len(records) > len({r["event_id"] for r in records})
