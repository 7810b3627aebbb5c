"""Hostile input into each real Spark job: Hypothesis-drawn malformed records (see
`tests/fuzz_records.py`), plus valid ones for `sensors`, go into the job's input topic
(`shipping`: a third into each of its three topics); the job keeps running (every query reads
every record and ends without an error), every record its parser rejects is in the
dead-letter topic once with a reason, and dead-lettered + processed == sent. Size:
`--records N` per job (CI: 2000; full size: 10000).
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import orjson
import pytest
from confluent_kafka import KafkaError, Message, Producer

from core.config import StackConfig
from core.kafka import ensure_topics, producer_config
from core.kafka.offsets import end_offsets
from core.kafka.reader import read_topic
from pipeline.config import PipelineConfig
from pipeline.jobs.cards import job as cards
from pipeline.jobs.sensors import job as sensors
from pipeline.jobs.shipping import job as shipping
from pipeline.jobs.vehicles import job as vehicles
from pipeline.kafka_io import parse_events, read_kafka_batch
from tests.fuzz_records import T0, malformed_records
from tests.shipping_run import TOPIC

pytestmark = pytest.mark.integration

#: Kinds no parser may accept: each must be in the dead-letter topic.
ALWAYS_REJECTED = {
    "truncated_json",
    "deep_nesting",
    "missing_id",
    "time_1970",
    "time_2200",
    "nan_infinity",
    "huge_string",  # its event_id is null
    "not_an_object",
}


@dataclass(frozen=True)
class FuzzedJob:
    name: str
    module: ModuleType
    entity_key: str
    schema: Any  # the job's own Spark schema and required fields: its parser, in batch
    required: tuple[str, ...] = ()
    settings: dict[str, Any] = field(default_factory=dict)  # its dead-letter query's trigger
    valid: bool = False  # also send valid events (sensors: any sensor reading is one)


ONCE = {"deadletter_trigger": {"mode": "available_now"}}
JOBS = [
    FuzzedJob(
        "sensors",
        sensors,
        "sensor_id",
        sensors.event_schema("sensor_id"),
        valid=True,
    ),
    FuzzedJob(
        "cards",
        cards,
        "card_token",
        cards.TRANSACTION_SCHEMA,
        cards.REQUIRED,
        {"cards": {**ONCE, "profiles_topic": None}},  # fuzzes its one input topic
    ),
    FuzzedJob(
        "vehicles",
        vehicles,
        "vehicle_id",
        vehicles.VEHICLE_SCHEMA,
        vehicles.REQUIRED,
        {"vehicles": ONCE},
    ),
]


def valid_records(n: int) -> list[tuple[bytes | None, bytes, str]]:
    return [
        (
            f"s-{i % 13}".encode(),
            orjson.dumps(
                {"event_id": f"ok-{i}", "sensor_id": f"s-{i % 13}", "event_time": T0 + i * 997}
            ),
            "valid",
        )
        for i in range(n)
    ]


@pytest.mark.parametrize("job", JOBS, ids=[j.name for j in JOBS])
def test_fuzzed_job_dead_letters_every_bad_record(
    job: FuzzedJob, kafka_stack: StackConfig, spark, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    n = int(request.config.getoption("--records"))
    run = uuid.uuid4().hex[:8]
    source, sink, deadletter = f"fuzz.events-{run}", f"fuzz.counts-{run}", f"fuzz.dead-{run}"
    ensure_topics(kafka_stack, [source], partitions=1)  # offset i is record i
    ensure_topics(kafka_stack, [sink, deadletter])
    records = malformed_records(n, seed=13, entity_key=job.entity_key)
    if job.valid:
        records += valid_records(n // 10)
    producer = Producer(producer_config(kafka_stack, **{"message.max.bytes": 2_000_000}))
    for key, value, _ in records:
        producer.produce(source, value, key=key)
        producer.poll(0)
    assert producer.flush(120) == 0
    sent = len(records)

    data = kafka_stack.model_dump(mode="json")
    data["dirs"]["checkpoints"] = str(tmp_path / "checkpoints")
    data["dirs"]["lake"] = str(tmp_path / "lake")
    stack = StackConfig.model_validate(data)
    cfg = PipelineConfig(
        job=job.name,
        input_topics=[source],
        output_topic=sink,
        deadletter_topic=deadletter,
        entity_key=job.entity_key,
        trigger={"mode": "available_now"},
        **job.settings,
    )
    queries = job.module.start(spark, stack, cfg)
    for query in queries:
        assert query.awaitTermination(600), f"{query.name} still ran after 600 s"
        assert query.exception() is None  # the job kept running to the end of its input
        # Each Kafka source of the query read every record; one the query reads in k branches
        # (cards's union of feature windows) counts each record k times.
        read: Counter[int] = Counter()
        for progress in query.recentProgress:
            for i, source_progress in enumerate(progress["sources"]):
                read[i] += source_progress["numInputRows"]
        assert read and all(k > 0 and k % sent == 0 for k in read.values()), (
            f"{query.name} read {read} of {sent}"
        )

    dead = read_topic(stack, deadletter)
    assert all(d["job"] == job.name and d["topic"] == source for d in dead)
    assert all(isinstance(d["reason"], str) and d["reason"] for d in dead)
    offsets = [d["offset"] for d in dead]
    assert len(set(offsets)) == len(offsets)  # each bad record once
    batch = read_kafka_batch(spark, stack, [source])
    processed = parse_events(batch, job.schema, job.required)[0].count()
    assert len(dead) + processed == sent
    kinds = [kind for _, _, kind in records]
    rejected = set(offsets)
    assert not [i for i, k in enumerate(kinds) if k == "valid" and i in rejected]
    missed = Counter(k for i, k in enumerate(kinds) if k in ALWAYS_REJECTED and i not in rejected)
    assert not missed, f"accepted as events: {missed}"
    reasons = Counter(d["reason"] for d in dead)
    print(f"fuzz {job.name}: sent {sent}, dead-lettered {len(dead)}, processed {processed}")
    print(f"  reasons: {dict(reasons)}; kinds: {dict(Counter(kinds))}")


def test_fuzzed_shipping_job_dead_letters_every_bad_record(
    kafka_stack: StackConfig, spark, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """`shipping` reads its three topics (DESIGN's names) from their end offsets before the
    run; a third of the records into each, keyed by its entity. Its alerts query never idles
    (processing-time timers), so it runs in micro-batches and is drained to the end offsets."""
    n = int(request.config.getoption("--records"))
    run = uuid.uuid4().hex[:8]
    inputs = list(shipping.SOURCES)
    ensure_topics(kafka_stack, inputs)
    start = {t: {str(p): o for p, o in end_offsets(kafka_stack, t).items()} for t in inputs}
    keys = {topic: key for topic, key in TOPIC.values()}
    kinds: dict[tuple[str, int, int], str] = {}  # (topic, partition, offset) -> kind

    def delivered(kind: str) -> Callable[[KafkaError | None, Message], None]:
        def record(error: KafkaError | None, message: Message) -> None:
            assert error is None, error
            kinds[(str(message.topic()), int(message.partition()), int(message.offset()))] = kind

        return record

    producer = Producer(producer_config(kafka_stack, **{"message.max.bytes": 2_000_000}))
    sent: Counter[str] = Counter()
    for i, topic in enumerate(inputs):
        for key, value, kind in malformed_records(n // 3, seed=13 + i, entity_key=keys[topic]):
            producer.produce(topic, value, key=key, on_delivery=delivered(kind))
            producer.poll(0)
            sent[topic] += 1
    assert producer.flush(120) == 0

    dirs = {"checkpoints": tmp_path / "checkpoints", "lake": tmp_path / "lake"}
    stack = kafka_stack.model_copy(update={"dirs": kafka_stack.dirs.model_copy(update=dirs)})
    cfg = PipelineConfig(
        job="shipping",
        input_topics=inputs,
        output_topic=f"fuzz.ship-alerts-{run}",
        deadletter_topic=f"fuzz.ship-dead-{run}",
        starting_offsets=orjson.dumps(start).decode(),
        trigger={"mode": "microbatch", "interval": "1 second"},
        shipping={"settle": "1 second"},
    )
    queries = shipping.start(spark, stack, cfg)
    try:
        shipping.drain_all(queries, stack, settle_s=2, timeout_s=500)
        for query in queries:
            assert query.isActive and query.exception() is None  # the job kept running
    finally:
        for query in queries:
            query.stop()

    dead = read_topic(stack, cfg.deadletter_topic)
    assert all(d["job"] == "shipping" and d["topic"] in inputs for d in dead)
    assert all(isinstance(d["reason"], str) and d["reason"] for d in dead)
    rejected = {(d["topic"], d["partition"], d["offset"]) for d in dead}
    assert len(rejected) == len(dead)  # each bad record once
    batch = read_kafka_batch(spark, stack, inputs, orjson.dumps(start).decode())
    for topic, (_kind, schema, required) in shipping.SOURCES.items():
        processed = parse_events(batch.where(batch.topic == topic), schema, required)[0].count()
        from_topic = sum(1 for d in dead if d["topic"] == topic)
        assert from_topic + processed == sent[topic], (topic, from_topic, processed)
    missed = Counter(k for at, k in kinds.items() if k in ALWAYS_REJECTED and at not in rejected)
    assert not missed, f"accepted as events: {missed}"
    print(f"fuzz shipping: sent {sum(sent.values())}, dead-lettered {len(dead)}")
