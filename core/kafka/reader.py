"""Read what evaluation needs from Kafka: every record up to the current end of a topic."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import orjson
from confluent_kafka import Consumer, KafkaError, TopicPartition

from core.config import StackConfig
from core.contracts.events import SIMULATOR_RUN
from core.kafka.admin import admin_client
from core.kafka.clients import consumer_config
from core.kafka.offsets import end_offsets


def read_topic(
    stack: StackConfig,
    topic: str,
    timeout_s: float = 60.0,
    since: Mapping[int, int] | None = None,
) -> list[dict[str, Any]]:
    """All JSON records of `topic` from the beginning (or the offsets `since`, per partition)
    to its end offsets now; [] if absent.

    A record that is not a JSON object is skipped here: evaluation reads only the outputs of
    streamsim's own components, which the dead-letter paths already police.
    """
    if topic not in admin_client(stack).list_topics(timeout=10).topics:
        return []
    starts = dict(since or {})
    ends = {p: e for p, e in end_offsets(stack, topic).items() if e > starts.get(p, 0)}
    if not ends:
        return []
    consumer = Consumer(
        consumer_config(stack, group_id="streamsim-evaluate", **{"enable.partition.eof": True})
    )
    consumer.assign([TopicPartition(topic, p, starts.get(p, 0)) for p in ends])
    records: list[dict[str, Any]] = []
    remaining = set(ends)
    last_read = time.monotonic()
    try:
        while remaining:
            # consume() waits its whole timeout unless the batch fills: poll in short steps
            batch = consumer.consume(10_000, timeout=0.2)
            if not batch:
                if time.monotonic() - last_read > timeout_s:
                    unread = sorted(remaining)
                    raise TimeoutError(f"reading {topic} stalled with partitions {unread} unread")
                continue
            last_read = time.monotonic()
            for msg in batch:
                partition, offset, error = msg.partition() or 0, msg.offset() or 0, msg.error()
                if error is not None and error.code() == KafkaError._PARTITION_EOF:
                    remaining.discard(partition)
                elif error is not None:
                    raise RuntimeError(f"reading {topic}: {error}")
                elif offset < ends[partition]:
                    if offset + 1 == ends[partition]:
                        remaining.discard(partition)
                    value = orjson.loads(msg.value() or b"null")
                    if isinstance(value, dict):
                        records.append(value)
    finally:
        consumer.close()
    return records


def latest_run(metrics: list[dict[str, Any]], scenario: str) -> dict[str, Any] | None:
    runs = [
        r for r in metrics if r.get("schema") == SIMULATOR_RUN and r.get("scenario") == scenario
    ]
    return max(runs, key=lambda r: r["finished_at"]) if runs else None
