"""`tail_records`: the last records of each partition of a JSON topic, read on request and
cached briefly. For topics that change once per window (the sketch aggregates), where following
the whole topic in a thread would buy nothing."""

from __future__ import annotations

import threading
import time
from typing import Any

import orjson
from confluent_kafka import KafkaException

from core.config import StackConfig
from core.kafka.admin import admin_client
from core.kafka.offsets import end_offsets
from core.kafka.reader import topic_values

#: Records read back from the end of each partition: a few windows' worth.
TAIL = 500
#: A read is reused this long (the topics change once per window).
CACHE_S = 5.0
_cache: dict[str, tuple[float, list[dict[str, Any]]]] = {}
_lock = threading.Lock()


class TopicsUnreachable(RuntimeError):
    """Kafka did not answer; the message says why."""


def tail_records(stack: StackConfig, topic: str, per_partition: int = TAIL) -> list[dict]:
    """The last `per_partition` JSON objects of each partition of `topic` ([] if absent;
    anything else is skipped). Raises `TopicsUnreachable` when Kafka does not answer."""
    with _lock:
        hit = _cache.get(topic)
        if hit is not None and time.monotonic() - hit[0] < CACHE_S:
            return hit[1]
    try:
        records = _read_tail(stack, topic, per_partition)
    except KafkaException as exc:
        raise TopicsUnreachable(f"Kafka is unreachable: {exc.args[0]}") from None
    with _lock:
        _cache[topic] = (time.monotonic(), records)
    return records


def _read_tail(stack: StackConfig, topic: str, per_partition: int) -> list[dict]:
    if topic not in admin_client(stack).list_topics(timeout=10).topics:
        return []
    since = {p: max(0, end - per_partition) for p, end in end_offsets(stack, topic).items()}
    records = []
    for values in topic_values(stack, topic, since, timeout_s=10.0):
        for raw in values:
            try:
                value = orjson.loads(raw or b"null")
            except orjson.JSONDecodeError:
                continue
            if isinstance(value, dict):
                records.append(value)
    return records
