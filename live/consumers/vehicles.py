"""`VehicleTail`: the consumer thread that reads `vehicles.telemetry` into a `VehicleView`
under a read budget (the budget, skipping ahead and ordering: see `live.views.vehicles`),
its Python work paced to a share of a core (`live.consumers.pacing`)."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any, Protocol

from confluent_kafka import Consumer, KafkaException, TopicPartition

from core.config import StackConfig
from core.kafka import consumer_config
from core.kafka.logger import kafka_logger
from live.consumers.pacing import DEFAULT_SHARE, CpuPacer


class RawView(Protocol):
    """What the tail feeds: a `VehicleView`, or the sensor feed's `SensorView`."""

    def add_raw(self, value: bytes | None, emitted_at: int | None, received_at: int) -> None:
        """A record's value, its CreateTime (None if it has none) and the read time, epoch ms."""


class VehicleTail:
    """Reads `topic` into `view` under a read budget (see the module doc); `run(stop)` is the
    thread's loop."""

    def __init__(
        self,
        stack: StackConfig,
        topic: str,
        view: RawView,
        *,
        read_cap_per_s: int = 5_000,
        start_back: int = 2_000,
        cycle_s: float = 0.5,
        refresh_s: float = 3.0,
        cpu_share: float = DEFAULT_SHARE,
    ) -> None:
        self.stack = stack
        self.topic = topic
        self.view = view
        self.read_cap_per_s = read_cap_per_s
        self.start_back = start_back
        self.cycle_s = cycle_s
        self.refresh_s = refresh_s
        self.pacer = CpuPacer(cpu_share)
        self.partitions: frozenset[int] = frozenset()
        self.records_read = 0
        self.records_skipped = 0
        self.skips = 0
        self.last_skip_at: int | None = None  # epoch ms
        self.error: str | None = None
        self._behind = False
        self._next: dict[int, int] = {}  # partition -> the offset the tail reads next

    def consumer(self) -> Consumer:
        return Consumer(
            consumer_config(
                self.stack,
                f"streamsim-vehicles-{uuid.uuid4().hex[:12]}",
                **{
                    "logger": kafka_logger("live.kafka"),
                    "enable.partition.eof": False,
                    # A small prefetch queue: a fast topic must not fill 64 MB per consumer.
                    "queued.max.messages.kbytes": 2048,
                    "queued.min.messages": 2000,
                    "fetch.max.bytes": 1_048_576,
                    "max.partition.fetch.bytes": 262_144,
                },
            )
        )

    def run(self, stop: threading.Event) -> None:
        consumer = self.consumer()
        self.partitions = frozenset()
        self._next = {}
        try:
            next_refresh = 0.0
            while not stop.is_set():
                if time.monotonic() >= next_refresh:
                    self._assign_new(consumer)
                    next_refresh = time.monotonic() + self.refresh_s
                if not self.partitions:
                    stop.wait(0.5)
                    continue
                self._cycle(consumer, stop)
        finally:
            consumer.close()

    def budget(self) -> int:
        return max(1, int(self.read_cap_per_s * self.cycle_s))

    def _assign_new(self, consumer: Consumer) -> None:
        try:
            meta = consumer.list_topics(self.topic, timeout=5.0).topics.get(self.topic)
        except KafkaException as exc:
            self.error = str(exc.args[0]) if exc.args else "cannot reach Kafka"
            return
        self.error = None
        if meta is None or meta.error is not None:
            return  # not created yet (no run so far)
        new = []
        for partition in meta.partitions:
            if partition in self.partitions:
                continue
            low, high = consumer.get_watermark_offsets(
                TopicPartition(self.topic, partition), timeout=5.0
            )
            start = max(low, high - self.start_back)
            new.append(TopicPartition(self.topic, partition, start))
            self._next[partition] = start
        if new:
            consumer.incremental_assign(new)
            self.partitions = self.partitions | {tp.partition for tp in new}

    def _cycle(self, consumer: Consumer, stop: threading.Event) -> None:
        started = time.monotonic()
        if self._behind:
            self._skip_ahead(consumer)
        budget, read = self.budget(), 0
        while read < budget:
            left = self.cycle_s - (time.monotonic() - started)
            if left <= 0:
                break
            messages = consumer.consume(min(500, budget - read), left)
            now_ms = time.time_ns() // 1_000_000
            add, after = self.view.add_raw, self._next
            for msg in messages:
                err = msg.error()
                if err is not None:
                    self.error = err.str()
                    continue
                kind, at = msg.timestamp()
                add(msg.value(), at if kind else None, now_ms)
                after[msg.partition()] = msg.offset() + 1  # type: ignore[index,operator]
                self.pacer.tick()
            read += len(messages)
        self.records_read += read
        self._behind = read >= budget
        if self._behind:  # the budget is spent: idle until the cycle ends
            stop.wait(max(0.0, self.cycle_s - (time.monotonic() - started)))

    def _skip_ahead(self, consumer: Consumer) -> None:
        """Each partition more than its share of a cycle's budget behind its end jumps to that
        share before the end. (Where the tail is comes from its own bookkeeping: the consumer's
        `position()` knows nothing of a partition before its first message after a seek.)"""
        keep = max(1, self.budget() // max(1, len(self.partitions)))
        for partition in self.partitions:
            at = self._next.get(partition)
            if at is None:
                continue
            tp = TopicPartition(self.topic, partition)
            try:
                _, high = consumer.get_watermark_offsets(tp, timeout=2.0)
                if high - at <= keep:
                    continue
                consumer.seek(TopicPartition(self.topic, partition, high - keep))
            except KafkaException:
                continue  # e.g. not fetching yet: next cycle
            self._next[partition] = high - keep
            self.records_skipped += high - keep - at
            self.skips += 1
            self.last_skip_at = time.time_ns() // 1_000_000

    def sampling(self) -> dict[str, Any]:
        return {
            "read_cap_per_s": self.read_cap_per_s,
            "records_read": self.records_read,
            "records_skipped": self.records_skipped,
            "skips": self.skips,
            "last_skip_at": self.last_skip_at,
        }
