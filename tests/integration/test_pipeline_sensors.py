"""Real broker + real Spark: `sensors` with its sensor alerts on a seeded sensor fleet.

A small fleet (100 sensors, 8 simulated minutes, seed 9; faults 100 times as often as shipped
and batteries draining across the low mark) is simulated in process and its records, in
delivery order (outages, duplicates and all), go to a topic of the test's own; one reading two
hours on moves the watermark (1 hour: nothing is late) past them all. The job runs in each
`rules_form`. In the python form its stuck-sensor, spike and silent-device alerts must be the
batch evaluation's (`streamsim.evaluate.sensors.run_rules`) over the same records, id for id,
and low battery alerts once per sensor that reported it (the battery only drains: one episode
each), at its first low reading. In the engine form its alerts must be the engine form's batch
run over the same records (`engine.batch_alerts`), id for id, and among the python forms'
(its misses are by design: `pipeline.rules`); it counts in its alerts query, one read fewer.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pandas as pd
import pytest
import yaml
from confluent_kafka import Producer
from pyspark.sql.types import StructType

from core.config import StackConfig
from core.kafka import ensure_topics, producer_config
from core.kafka.reader import read_topic
from pipeline.config import PipelineConfig
from pipeline.jobs.sensors import job
from pipeline.jobs.sensors.config import SensorsSettings
from pipeline.jobs.sensors.engine import batch_alerts
from pipeline.rules.alert_rows import with_alert_ids
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


@dataclass(frozen=True)
class Run:
    form: str
    records: list[dict[str, Any]]
    alerts: list[dict[str, Any]]
    counts: list[dict[str, Any]]
    queries: list[str]


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return fleet(tmp_path_factory.mktemp("sensors-fleet"))


@pytest.fixture(scope="module", params=["python", "engine"])
def run(
    request: pytest.FixtureRequest,
    records: list[dict[str, Any]],
    kafka_stack: StackConfig,
    spark: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> Run:
    """The job in one `rules_form` over the fleet: what it wrote."""
    form = request.param
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
            "sensors": {
                "sensor_alerts": True,
                "alerts_topic": f"alerts-{tag}",
                "rules_form": form,
            },
        }
    )
    ensure_topics(stack, [*cfg.input_topics, cfg.output_topic, cfg.deadletter_topic], partitions=1)
    last = max(records, key=lambda r: r["event_time"])
    clock = {**last, "event_id": f"clock-{tag}", "sensor_id": f"clock-{tag}"}
    clock["event_time"] = last["event_time"] + 2 * HOUR_MS
    queries = job.start(spark, stack, cfg)
    try:
        assert job.ALERTS_QUERY in [q.name for q in queries]
        produce(stack, cfg.input_topics[0], [*records, clock])
        for _ in range(2):  # the data, then the batches after the watermark moved
            for query in queries:
                query.processAllAvailable()
    finally:
        for query in queries:
            query.stop()
    alerts = read_topic(stack, cfg.sensors.alerts_topic)
    counts = read_topic(stack, cfg.output_topic)
    return Run(form, records, alerts, counts, [str(q.name) for q in queries])


def typed(record: dict[str, Any], schema: StructType) -> tuple[Any, ...]:
    """A record's fields in `schema`'s order, numbers as its types have them."""
    cast = {"double": float, "bigint": int}
    return tuple(
        None
        if record.get(f.name) is None
        else cast.get(f.dataType.simpleString(), str)(record[f.name])
        for f in schema.fields
    )


def keyed(frame: pd.DataFrame) -> set[tuple[str, str, tuple[str, ...]]]:
    return {(r.alert_id, r.label, tuple(r.event_ids)) for r in frame.itertuples()}


def test_fault_alerts_are_their_forms_batch_evaluations(run: Run, spark: Any) -> None:
    readings = pd.DataFrame(run.records).drop_duplicates("event_id", ignore_index=True)
    python = keyed(sensors.run_rules(readings))
    got = [(a["alert_id"], a["label"], tuple(a["event_ids"])) for a in run.alerts]
    faults = {g for g in got if g[1] != "low_battery"}
    assert {label for _, label, _ in python} == {"stuck_sensor", "spike", "silent_device"}
    if run.form == "python":
        assert faults == python
    else:
        schema = job.event_schema("sensor_id", sensor_fields=True)
        frame = spark.createDataFrame([typed(r, schema) for r in run.records], schema)
        rules = SensorsSettings()
        found = batch_alerts(frame, "sensor_id", rules.rules_window, rules.rules_slide)
        batch = with_alert_ids(found.toPandas())
        assert set(got) == keyed(batch)
        assert faults <= python
        silent = {g for g in python if g[1] == "silent_device"}
        assert silent and {g for g in faults if g[1] == "silent_device"} == silent
        assert len(faults) >= 0.8 * len(python)  # the misses by design are the few
    assert len(got) == len(set(got))  # each alert once, duplicates in the input or not
    assert {(a["source"], a["job"]) for a in run.alerts} == {("pipeline", job.NAME)}


def test_low_battery_alerts_once_per_sensor_at_its_first_low_reading(run: Run) -> None:
    low = (
        pd.DataFrame(run.records)
        .query("status == 'low_battery'")
        .sort_values(["event_time", "event_id"])
    )
    first = low.drop_duplicates("sensor_id").set_index("sensor_id")["event_id"].to_dict()
    got = [(a["entity_id"], a["event_ids"][0]) for a in run.alerts if a["label"] == "low_battery"]
    assert 10 <= len(first) < 100  # some sensors crossed the mark, not all
    if run.form == "python":
        assert sorted(got) == sorted(first.items())
    else:  # not a sensor low from its first reading (by design: `pipeline.rules.threshold`)
        assert set(got) <= set(first.items())
        assert len(got) >= 0.5 * len(first)


def test_counts_still_count_every_record(run: Run) -> None:
    records, counts = run.records, run.counts  # duplicates included: counts count deliveries
    assert sum(c["events"] for c in counts) == len(records) > len({r["event_id"] for r in records})


def test_the_engine_form_counts_in_its_alerts_query(run: Run) -> None:
    own = ["sensors.counts"] if run.form == "python" else []
    silence = [job.SILENCE_QUERY] if run.form == "engine" else []
    assert run.queries == [*own, "sensors.deadletter", job.ALERTS_QUERY, *silence]
