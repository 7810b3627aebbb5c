"""`<job>.sketches` as a streaming query (`pipeline.sketches.start_sketches`): card events
written to a topic of the test's own, read back by Spark from Kafka, published to the
heavy-hitters and distinct-counts topics of the test's own, as the card job runs it."""

from __future__ import annotations

import uuid
from pathlib import Path

import orjson
from confluent_kafka import Producer

from core.config import StackConfig
from core.kafka import ensure_topics
from core.kafka.clients import producer_config
from core.kafka.reader import read_topic
from pipeline.jobs.cards.job import TRANSACTION_SCHEMA
from pipeline.jobs.cards.sketches import DISTINCT_OF, card_sketch_rows
from pipeline.kafka_io import parse_events, read_kafka
from pipeline.settings import TriggerSettings
from pipeline.sketch_settings import SketchSettings
from pipeline.sketches import start_sketches

T0 = 1_700_000_100_000  # a 5-minute boundary


def test_the_sketches_query_publishes_each_closed_window(
    spark, kafka_stack: StackConfig, tmp_path: Path
) -> None:
    run = f"it-sketch-{uuid.uuid4().hex[:8]}"
    source = f"{run}.transactions"
    settings = SketchSettings(
        enabled=True,
        heavy_hitters_topic=f"{run}.heavy",
        distinct_counts_topic=f"{run}.distinct",
        trigger=TriggerSettings(mode="available_now"),
    )
    ensure_topics(kafka_stack, [source])
    producer = Producer(producer_config(kafka_stack))
    # two windows: t1 busiest with 12 distinct cards, t2 next; then one late-enough event
    # that moves the sink's watermark past both
    events = [
        (T0 + i * 1_000, "t1" if i % 3 else "t2", f"tok_{i % 12:03d}") for i in range(300)
    ] + [(T0 + 300_000 + i * 1_000, "t3", f"tok_{i:03d}") for i in range(20)]
    events.append((T0 + 1_200_000, "t9", "tok_999"))
    for i, (at, terminal, card) in enumerate(events):
        record = {
            "schema": "cards.transaction/1",
            "event_id": f"{run}-{i}",
            "event_time": at,
            "card_token": card,
            "amount": 10.0,
            "merchant_id": f"m-{terminal}",
            "terminal_id": terminal,
        }
        producer.produce(source, orjson.dumps(record), key=card)
    assert producer.flush(30) == 0

    parsed, _ = parse_events(read_kafka(spark, kafka_stack, [source]), TRANSACTION_SCHEMA)
    query = start_sketches(
        kafka_stack,
        parsed,
        "cards",
        settings,
        card_sketch_rows,
        DISTINCT_OF,
        60_000,
        str(tmp_path / "sketches"),
    )
    try:
        assert query.awaitTermination(180), "the sketches query did not finish"
        assert query.exception() is None
    finally:
        query.stop()
    heavy = read_topic(kafka_stack, settings.heavy_hitters_topic)
    first = sorted(
        (r for r in heavy if r["window_start"] == T0 and r["kind"] == "terminal"),
        key=lambda r: r["rank"],
    )
    assert [(r["key"], r["estimate"]) for r in first] == [("t1", 200), ("t2", 100)]
    assert first[0]["window_items"] == 300 and first[0]["eps"] == settings.count_min.eps
    assert {r["window_start"] for r in heavy} == {T0, T0 + 300_000}  # the last one is open
    distinct = {
        (r["window_start"], r["key"]): r["estimate"]
        for r in read_topic(kafka_stack, settings.distinct_counts_topic)
    }
    assert distinct == {(T0, "t1"): 8.0, (T0, "t2"): 4.0, (T0 + 300_000, "t3"): 20.0}
