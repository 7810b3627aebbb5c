"""`OffsetsFeed`: the thread that reads a compacted `<domain>.clock-offsets` topic from its
start into an `OffsetTable` (`live.views.clock`), then follows it. The topic holds one row per
device and regime once compacted (the skew estimator's jobs publish a row per device every
30 s of send time), so reading it whole is reading the fleet."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

from core.config import StackConfig
from core.kafka import consumer_config
from core.kafka.follower import TopicFollower
from core.kafka.logger import kafka_logger
from live.views.clock import OffsetTable


class OffsetsFeed(TopicFollower):
    """`table` and the thread that fills it from `topic`; `start()`/`stop()` run the thread.
    A topic that does not exist yet (no job on corrected time has run) is looked for again
    every `refresh_s`."""

    thread_name = "clock-offsets"

    def __init__(
        self,
        stack: StackConfig,
        topic: str,
        table: OffsetTable | None = None,
        *,
        refresh_s: float = 5.0,
        poll_s: float = 0.5,
        stop: threading.Event | None = None,
    ) -> None:
        super().__init__(name=f"clock-offsets-{topic}", stop=stop)
        self.stack = stack
        self.topic = topic
        self.table = table or OffsetTable()
        self.refresh_s = refresh_s
        self.poll_s = poll_s
        self.partitions: frozenset[int] = frozenset()
        self.status = "starting"

    def run(self, stop: threading.Event) -> None:
        consumer = Consumer(
            consumer_config(
                self.stack,
                f"streamsim-clock-{uuid.uuid4().hex[:12]}",
                **{"logger": kafka_logger("live.kafka"), "enable.partition.eof": False},
            )
        )
        looked = 0.0
        try:
            while not stop.is_set():
                if time.monotonic() - looked >= self.refresh_s:  # new partitions, or the topic
                    self._assign_new(consumer)
                    looked = time.monotonic()
                if not self.partitions:
                    stop.wait(self.refresh_s)
                    continue
                for msg in consumer.consume(500, self.poll_s):
                    if msg.error() is None:
                        self.table.add_raw(msg.value())
        finally:
            consumer.close()

    def _assign_new(self, consumer: Consumer) -> None:
        try:
            meta = consumer.list_topics(self.topic, timeout=2.0).topics.get(self.topic)
        except KafkaException as exc:
            self.status = "waiting for Kafka"
            self.error = str(exc.args[0]) if exc.args else "cannot reach Kafka"
            return
        if meta is None or meta.error is not None:
            self.status = "no topic yet"
            return
        new = [p for p in meta.partitions if p not in self.partitions]
        if new:
            consumer.incremental_assign(
                [TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in new]
            )
            self.partitions = self.partitions | frozenset(new)
        self.status = "live"

    def source(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "status": self.status,
            "partitions": len(self.partitions),
            "error": self.error,
            **self.table.stats(),
        }
