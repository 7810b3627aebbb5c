"""`live.consumers.tails.tail_records` against the session broker: the end of each partition,
JSON objects only, and [] for a topic that does not exist."""

from __future__ import annotations

import uuid

import orjson
import pytest
from confluent_kafka import Producer

from core.config import StackConfig
from core.kafka import ensure_topics
from core.kafka.clients import producer_config
from live.consumers import tails


def test_tail_records_reads_the_end_of_each_partition(kafka_stack: StackConfig) -> None:
    topic = f"tail-{uuid.uuid4().hex[:8]}"
    assert tails.tail_records(kafka_stack, topic) == []  # absent
    tails._cache.clear()
    ensure_topics(kafka_stack, [topic])
    producer = Producer(producer_config(kafka_stack))
    for i in range(30):
        producer.produce(topic, orjson.dumps({"key": f"t{i}"}), partition=0)
    producer.produce(topic, b"{not json", partition=0)
    producer.produce(topic, b"[1, 2]", partition=0)
    assert producer.flush(30) == 0
    got = tails.tail_records(kafka_stack, topic, per_partition=12)
    assert [r["key"] for r in got] == [f"t{i}" for i in range(20, 30)]


def test_an_unreachable_broker_says_so() -> None:
    stack = StackConfig.model_validate({"kafka": {"bootstrap": "127.0.0.1:9"}})
    with pytest.raises(tails.TopicsUnreachable, match="Kafka is unreachable"):
        tails.tail_records(stack, f"tail-{uuid.uuid4().hex[:8]}")
