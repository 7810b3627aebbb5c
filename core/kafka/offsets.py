"""Topic end offsets and counts, read through a consumer without joining a group."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from core.config import StackConfig
from core.kafka.admin import admin_client
from core.kafka.clients import consumer_config

#: Not flagged retriable, but what a partition answers while its new leader settles.
_LEADER_SETTLING = (
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.UNKNOWN_TOPIC_OR_PART,
)


def end_offsets(stack: StackConfig, topic: str, timeout_s: float = 30.0) -> dict[int, int]:
    """Partition -> the offset the next record will get (the high watermark).

    Retries retriable errors: a topic created a moment ago may not have its leader ready yet.
    """
    partitions = admin_client(stack).list_topics(topic, timeout=10).topics[topic].partitions
    deadline = time.monotonic() + timeout_s
    while True:
        consumer = Consumer(consumer_config(stack, group_id="streamsim-offsets"))
        try:
            return {
                p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in partitions
            }
        except KafkaException as exc:
            error = exc.args[0]
            settling = error.retriable() or error.code() in _LEADER_SETTLING
            if not settling or time.monotonic() > deadline:
                raise
            time.sleep(0.5)  # and ask a new client: the old one may keep a stale leader
        finally:
            consumer.close()


def records_since(stack: StackConfig, topic: str, start: dict[int, int]) -> int:
    """How many records were appended to `topic` after the offsets in `start`."""
    end = end_offsets(stack, topic)
    return sum(offset - start.get(p, 0) for p, offset in end.items())
