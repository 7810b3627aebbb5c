"""Read what evaluation needs from Kafka: every record up to the current end of a topic."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from typing import Any

import orjson
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from core.config import StackConfig
from core.contracts.events import SIMULATOR_RUN
from core.errors import StreamsimError
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
    records: list[dict[str, Any]] = []
    for values in topic_values(stack, topic, since, timeout_s):
        for raw in values:
            value = orjson.loads(raw or b"null")
            if isinstance(value, dict):
                records.append(value)
    return records


def topic_values(
    stack: StackConfig,
    topic: str,
    since: Mapping[int, int] | None = None,
    timeout_s: float = 60.0,
) -> Iterator[list[bytes | None]]:
    """Batches of the raw record values of `topic`, from the beginning (or the offsets
    `since`, per partition) to its end offsets now; nothing if the topic is absent. A reader
    that must not hold every record at once parses them batch by batch."""
    for batch in topic_messages(stack, topic, since, timeout_s):
        yield [msg.value() for msg in batch]


def _topics(stack: StackConfig, topic: str) -> set[str]:
    """The cluster's topic names; a clear error (not a traceback) when it does not answer."""
    try:
        return set(admin_client(stack, quiet=True).list_topics(timeout=10).topics)
    except KafkaException as exc:
        raise StreamsimError(
            f"cannot read {topic}: Kafka at {stack.kafka.bootstrap_servers} did not answer "
            f"({exc.args[0].str() if exc.args else exc}); start it (`streamsim kafka up`) "
            "or point kafka.bootstrap at a running cluster"
        ) from None


def topic_messages(
    stack: StackConfig,
    topic: str,
    since: Mapping[int, int] | None = None,
    timeout_s: float = 60.0,
) -> Iterator[list[Message]]:
    """Batches of the records of `topic` (value, key, headers), from the beginning (or the
    offsets `since`, per partition) to its end offsets now; nothing if the topic is absent."""
    if topic not in _topics(stack, topic):
        return
    starts = dict(since or {})
    ends = {p: e for p, e in end_offsets(stack, topic).items() if e > starts.get(p, 0)}
    if not ends:
        return
    consumer = Consumer(
        consumer_config(stack, group_id="streamsim-evaluate", **{"enable.partition.eof": True})
    )
    consumer.assign([TopicPartition(topic, p, starts.get(p, 0)) for p in ends])
    remaining, last_read = set(ends), time.monotonic()
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
            messages = []
            for msg in batch:
                partition, offset, error = msg.partition() or 0, msg.offset() or 0, msg.error()
                if error is not None and error.code() == KafkaError._PARTITION_EOF:
                    remaining.discard(partition)
                elif error is not None:
                    raise RuntimeError(f"reading {topic}: {error}")
                elif offset < ends[partition]:
                    if offset + 1 == ends[partition]:
                        remaining.discard(partition)
                    messages.append(msg)
            yield messages
    finally:
        consumer.close()


def latest_run(
    metrics: list[dict[str, Any]], scenario: str, id_prefix: str | None = None
) -> dict[str, Any] | None:
    """The newest finished run of `scenario` among the `simulator.run/1` records (of the run
    whose event ids start with `id_prefix` only, when given: other runs of the scenario may
    finish later on a shared stack); None if there is none.

    >>> runs = [{"schema": SIMULATOR_RUN, "scenario": "s", "id_prefix": p, "finished_at": t}
    ...         for p, t in (("s-a-", 1), ("s-b-", 2))]
    >>> latest_run(runs, "s")["id_prefix"], latest_run(runs, "s", "s-a-")["id_prefix"]
    ('s-b-', 's-a-')
    >>> latest_run(runs, "s", "s-c-") is None
    True
    """
    runs = [
        r
        for r in metrics
        if r.get("schema") == SIMULATOR_RUN
        and r.get("scenario") == scenario
        and (id_prefix is None or r.get("id_prefix") == id_prefix)
    ]
    return max(runs, key=lambda r: r["finished_at"]) if runs else None
