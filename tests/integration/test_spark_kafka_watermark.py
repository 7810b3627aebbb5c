"""Real broker + real Spark: a watermarked tumbling-window count, read back from Kafka."""

from __future__ import annotations

import time
import uuid
from typing import Any

import orjson
import pytest
from confluent_kafka import Consumer, Producer

import pipeline.drain
from core.config import StackConfig
from core.kafka import consumer_config, ensure_topics, producer_config
from pipeline.catalog import drain_job
from pipeline.config import PipelineConfig
from pipeline.jobs.sensors import job as sensors
from pipeline.progress import dropped_by_watermark

pytestmark = pytest.mark.integration

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z, aligned to the 10 s windows
WINDOW_MS = 10_000

# Each phase becomes one or more micro-batches. Within a phase the newest event comes last, so
# the watermark (max event time - 5 s) only moves between the late events and what follows.
PHASES: list[list[tuple[str, int]]] = [
    [("s1", 1), ("s1", 3), ("s2", 2), ("s1", 12), ("s2", 11), ("s1", 13)],  # watermark -> 8 s
    [("s1", 9), ("s2", 27)],  # 9 s is out of order but on time (> 8 s): counted
    [("s1", 6), ("s2", 8), ("s1", 15), ("s2", 21), ("s1", 45)],  # 6, 8, 15 fall behind 22 s
    [("s2", 61)],  # watermark -> 56 s closes the [40 s, 50 s) window
]
TOO_LATE = 3
EXPECTED = {  # (entity, window start s) -> count, for every window closed by the final watermark
    ("s1", 0): 3,  # 1, 3, 9
    ("s2", 0): 1,  # 2
    ("s1", 10): 2,  # 12, 13
    ("s2", 10): 1,  # 11
    ("s2", 20): 2,  # 27, 21
    ("s1", 40): 1,  # 45
}


def produce(stack: StackConfig, topic: str, records: list[tuple[str, bytes]]) -> None:
    producer = Producer(producer_config(stack))
    for key, value in records:
        producer.produce(topic, key=key, value=value)
    assert producer.flush(30) == 0


def event(entity: str, second: int) -> tuple[str, bytes]:
    body = {"event_id": f"{entity}-{second}", "sensor_id": entity, "event_time": T0 + second * 1000}
    return entity, orjson.dumps(body)


def read_all(stack: StackConfig, topic: str, expected: int, timeout_s: float = 90.0) -> list[dict]:
    consumer = Consumer(consumer_config(stack, group_id=f"test-{uuid.uuid4()}"))
    consumer.subscribe([topic])
    rows: list[dict] = []
    deadline = time.monotonic() + timeout_s
    try:
        # Read until the expected count arrives, then a little longer to catch any extra row.
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                if len(rows) >= expected:
                    break
                continue
            assert msg.error() is None, msg.error()
            rows.append(orjson.loads(msg.value()))
    finally:
        consumer.close()
    return rows


def counting_job(kafka_stack: StackConfig, **settings: Any) -> tuple[StackConfig, PipelineConfig]:
    """The sensors job counting 10 s windows under a 5 s watermark, on topics and checkpoints
    of its own (one source partition keeps the order within a phase, so batches see the
    planned watermark)."""
    run = uuid.uuid4().hex[:8]
    source, sink, deadletter = f"test.events-{run}", f"aggregates.counts-{run}", f"deadletter-{run}"
    ensure_topics(kafka_stack, [source], partitions=1)
    ensure_topics(kafka_stack, [sink, deadletter])
    cfg = PipelineConfig(
        job="sensors",
        input_topics=[source],
        output_topic=sink,
        deadletter_topic=deadletter,
        entity_key="sensor_id",
        watermark="5 seconds",
        window="10 seconds",
        **settings,
    )
    checkpoints = kafka_stack.dirs.checkpoints / run
    stack = kafka_stack.model_copy(
        update={"dirs": kafka_stack.dirs.model_copy(update={"checkpoints": checkpoints})}
    )
    return stack, cfg


def test_sensors_with_watermark(kafka_stack: StackConfig, spark) -> None:
    stack, cfg = counting_job(kafka_stack)
    source, sink, deadletter = cfg.input_topics[0], cfg.output_topic, cfg.deadletter_topic
    queries = sensors.start(spark, stack, cfg)
    counts_query = next(q for q in queries if q.name.endswith(".counts"))
    try:
        for phase in PHASES:
            produce(stack, source, [event(e, s) for e, s in phase])
            counts_query.processAllAvailable()
        produce(stack, source, [("s9", b"{not json"), ("s9", b'{"event_id": "x"}')])
        for q in queries:
            q.processAllAvailable()

        rows = read_all(stack, sink, expected=len(EXPECTED))
        dropped = sum(dropped_by_watermark(p) for p in counts_query.recentProgress)
        rejects = read_all(stack, deadletter, expected=2)
    finally:
        for q in queries:
            q.stop()

    got = {(r["entity_id"], (r["window_start"] - T0) // 1000): r["events"] for r in rows}
    assert len(rows) == len(EXPECTED), rows
    assert got == EXPECTED
    assert all(r["window_end"] - r["window_start"] == WINDOW_MS for r in rows)
    assert dropped == TOO_LATE
    assert sorted((r["reason"], r["original"]) for r in rejects) == [
        ("missing or non-integer event_time", '{"event_id": "x"}'),
        ("not a JSON object", "{not json"),
    ]


def test_drain_settled_returns_after_the_batch_that_applies_the_last_watermark(
    kafka_stack: StackConfig, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every phase in one batch: its windows close only in the batch without data that
    applies the watermark it moved. The drain reads that from the checkpoint's commit log,
    and returns after it (the queries stop at once), without `processAllAvailable`."""
    stack, cfg = counting_job(kafka_stack, trigger={"mode": "microbatch", "interval": "3 seconds"})
    source, sink = cfg.input_topics[0], cfg.output_topic

    def no_fallback(queries: list[Any]) -> None:
        assert not queries, [q.name for q in queries]

    monkeypatch.setattr(pipeline.drain, "process_all_available", no_fallback)
    events = [event(e, s) for phase in PHASES for e, s in phase]
    queries = sensors.start(spark, stack, cfg)
    try:
        produce(stack, source, events)
        drain_job(queries, stack, cfg)
    finally:
        for q in queries:
            q.stop()
    # the final watermark, 61 s - 5 s, closes every window ending by 56 s; in one batch no
    # event is late
    expected: dict[tuple[str, int], int] = {}
    for phase in PHASES:
        for entity, second in phase:
            start = second // 10 * 10
            if start + 10 <= 56:
                expected[(entity, start)] = expected.get((entity, start), 0) + 1
    rows = read_all(stack, sink, expected=len(expected), timeout_s=30.0)
    assert {(r["entity_id"], (r["window_start"] - T0) // 1000): r["events"] for r in rows} == (
        expected
    )
