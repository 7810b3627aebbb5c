"""`pipeline.kafka_io.parse_events` in real Spark: each record parsed once, every reject named."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from pipeline.jobs.vehicles.job import REQUIRED, VEHICLE_SCHEMA
from pipeline.kafka_io import parse_events

pytestmark = pytest.mark.integration

GOOD = {"event_id": "e1", "vehicle_id": "v1", "event_time": 1_780_000_000_000, "speed_kmh": 50.0}
VALUES = {
    "good": json.dumps(GOOD),
    "not json": "{not json",
    "no id": json.dumps({**GOOD, "event_id": None}),
    "too old": json.dumps({**GOOD, "event_time": 5}),
    "no vehicle": json.dumps({k: v for k, v in GOOD.items() if k != "vehicle_id"}),
    "no value": None,
}


def raw_records(spark: Any) -> Any:
    """Rows shaped like `read_kafka`'s: key, value, topic, partition, offset, kafka_time."""
    now = datetime(2026, 11, 30, tzinfo=UTC)
    rows = [(k, v, "it.parse", 0, i, now) for i, (k, v) in enumerate(VALUES.items())]
    ddl = "key string, value string, topic string, partition int, offset long, kafka_time timestamp"
    return spark.createDataFrame(rows, ddl)


def test_every_record_is_an_event_or_a_named_reject(spark: Any) -> None:
    events, rejects = parse_events(raw_records(spark), VEHICLE_SCHEMA, REQUIRED)
    assert [(r.event_id, r.vehicle_id, r.speed_kmh) for r in events.collect()] == [
        ("e1", "v1", 50.0)
    ]
    reasons = {r.key: r.reject_reason for r in rejects.collect()}
    assert reasons == {
        "not json": "not a JSON object",
        "no id": "missing event_id",
        "too old": "event_time out of range (2000..2100)",
        "no vehicle": "missing vehicle_id",
        "no value": "missing event_id",
    }


def test_each_record_is_parsed_once(spark: Any) -> None:
    """The reject filter stays above the parse: pushed below it, from_json (no generated code)
    runs in the filter and again in the projection, twice the CPU of a parse."""
    events, rejects = parse_events(raw_records(spark), VEHICLE_SCHEMA, REQUIRED)
    for frame in (events, rejects):
        plan = frame._jdf.queryExecution().executedPlan().toString()
        assert plan.count("from_json(") == 1, plan
