"""Kafka for the bench: topics, their records and sizes, and the input a run drains."""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any

import orjson
import yaml
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from core.config import StackConfig
from core.config.loader import read_yaml
from core.errors import StreamsimError
from core.kafka import consumer_config, ensure_topics, producer_config
from core.kafka.admin import admin_client
from core.kafka.offsets import end_offsets
from streamsim.bench.pipeline.measure import event_time_per_s
from streamsim.bench.pipeline.settings import SCENARIO
from streamsim.bench.simulator import simulate
from streamsim.stackfile import write_stack_file

Record = tuple[dict[str, Any] | None, int]  # (parsed JSON value, broker timestamp ms)


def create_topic(stack: StackConfig, topic: str, partitions: int) -> None:
    """A topic whose records the broker stamps with its own append time."""
    new = NewTopic(topic, partitions, 1, config={"message.timestamp.type": "LogAppendTime"})
    admin = admin_client(stack)  # held until the future is done
    admin.create_topics([new])[topic].result(30)


def topic_records(stack: StackConfig, topic: str) -> list[Record]:
    """Every record of a topic: its JSON object (None if not one) and its timestamp."""
    ends = {p: end for p, end in end_offsets(stack, topic).items() if end > 0}
    consumer = Consumer(consumer_config(stack, group_id=f"bench-{uuid.uuid4()}"))
    consumer.assign([TopicPartition(topic, p, 0) for p in ends])
    out: list[Record] = []
    deadline = time.monotonic() + 120
    try:
        while ends and time.monotonic() < deadline:
            for msg in consumer.consume(10_000, timeout=0.2):
                if msg.error() is not None:
                    continue
                with suppress(orjson.JSONDecodeError):
                    value = orjson.loads(msg.value() or b"null")
                    out.append((value if isinstance(value, dict) else None, msg.timestamp()[1]))
                if (msg.offset() or 0) + 1 >= ends.get(msg.partition() or 0, 0):
                    ends.pop(msg.partition() or 0, None)
    finally:
        consumer.close()
    return out


def topic_size(stack: StackConfig, topic: str) -> int:
    return sum(end_offsets(stack, topic).values())


def wait_for_records(stack: StackConfig, topic: str, count: int, timeout_s: float) -> None:
    """Until `topic` holds `count` records or `timeout_s` has passed."""
    deadline = time.monotonic() + timeout_s
    while topic_size(stack, topic) < count and time.monotonic() < deadline:
        time.sleep(0.5)


def produce_input(
    stack: StackConfig,
    work: Path,
    topic: str,
    events: int,
    entities: int,
    name: str,
    scenario_path: Path = SCENARIO,
) -> int:
    """The scenario's events (renamed `name`) into a two-partition `topic`; its size."""
    ensure_topics(stack, [topic], partitions=2)
    data = read_yaml(scenario_path)
    data.update(name=name, entities=entities)
    data["domain"]["topic"] = topic
    scenario, stack_file = work / f"{name}.yaml", work / "stack.yaml"
    scenario.write_text(yaml.safe_dump(data))
    env = write_stack_file(stack, stack_file)  # client secrets by environment only
    args = ["--seed", "1", "--events", str(events), "--speed", "max", "--sink", "kafka"]
    simulate([str(scenario), "--config", str(stack_file), *args], env)
    return topic_size(stack, topic)


def produce_kinds(
    stack: StackConfig,
    work: Path,
    routes: Mapping[str, tuple[str, str]],
    events: int,
    entities: int,
    name: str,
    scenario_path: Path,
) -> int:
    """The scenario's events (renamed `name`) into two-partition topics by kind: `routes`
    maps an event's schema id to (topic, key field). For a scenario that writes several topics
    of fixed names (shipping): it is run into JSONL, then each event is sent to its kind's
    topic. The events sent in all."""
    topics = sorted({topic for topic, _ in routes.values()})
    ensure_topics(stack, topics, partitions=2)
    data = read_yaml(scenario_path)
    data.update(name=name, entities=entities)
    scenario, out = work / f"{name}.yaml", work / f"{name}-jsonl"
    scenario.write_text(yaml.safe_dump(data))
    args = ["--seed", "1", "--events", str(events), "--speed", "max", "--sink", "jsonl"]
    simulate([str(scenario), *args, "--out", str(out)])
    producer = Producer(producer_config(stack, **{"linger.ms": 20}))
    with (out / "events.jsonl").open("rb") as lines:
        for n, line in enumerate(lines):
            event = orjson.loads(line)
            schema = str(event.get("schema", "")).rsplit("/", 1)[0]
            if schema not in routes:
                raise StreamsimError(f"{name}: no input topic for events of schema {schema!r}")
            topic, key = routes[schema]
            producer.produce(topic, line.rstrip(b"\n"), key=str(event.get(key) or ""))
            if n % 10_000 == 0:
                producer.poll(0)
    if producer.flush(120):
        raise StreamsimError(f"{name}: the broker did not take every event in 120 s")
    return sum(topic_size(stack, topic) for topic in topics)


def event_time_rate(stack: StackConfig, topics: Sequence[str]) -> float:
    """Events per second of event time in `topics` (how fast their event time advances), over
    the middle 98%: a skewed or reset device clock (1970, 2200) does not stretch the span."""
    times = [int(r["event_time"]) for t in topics for r, _ in topic_records(stack, t) if r]
    return event_time_per_s(times)
