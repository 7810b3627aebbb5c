"""`ShippingTail`: the consumer thread that reads `shipping.containers` and
`shipping.port-events` into a `ContainerView` (`live.views.shipping`), and with a
`ShipsView` (`live.views.ships`) `shipping.positions` too, feeding it all three: one read
of the topics for both views.

Unlike the vehicle tail it never skips: an owner's container history must be whole, and a
voyage's readings land days late in one burst. Every partition is read from its beginning
(no consumer group, nothing committed); a burst is read at most `read_cap_per_s` records/s,
its Python work paced to a share of a core in short slices (`live.consumers.pacing`), so
a port flush of a big fleet never stalls the fraud endpoint in the same process; `lag()` says
how far behind the topics' ends the view is meanwhile. Partitions that appear later (the
first run after start-up creates the topics) are picked up within `refresh_s`.

The end offsets are read every `refresh_s`, so `lag` 0 means caught up with what the topics
held at `lag_as_of` (wall-clock ms), not with what was written since: a reader that wrote
records waits for a `lag_as_of` after its writes (a voyage flushed in the run's last second
is otherwise missing from a view that says it has no lag).
"""

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
from live.consumers.pacing import DEFAULT_SHARE, CpuPacer
from live.views.records import json_object
from live.views.shipping import CONTAINERS_TOPIC, PORT_EVENTS_TOPIC, ContainerView
from live.views.ships import POSITIONS_TOPIC, ShipsView


class ShippingTail(TopicFollower):
    """Reads the shipping topics into `view` (see the module doc); `run(stop)` is the thread's
    loop, `start()`/`stop()` run it on a thread of its own."""

    thread_name = "shipping-tail"

    def __init__(
        self,
        stack: StackConfig,
        view: ContainerView | None = None,
        *,
        fleet: ShipsView | None = None,
        topics: tuple[str, ...] | None = None,
        read_cap_per_s: int = 50_000,
        cycle_s: float = 0.5,
        refresh_s: float = 3.0,
        cpu_share: float = DEFAULT_SHARE,
    ) -> None:
        if read_cap_per_s < 1 or cycle_s <= 0 or refresh_s <= 0:
            raise ValueError("read_cap_per_s >= 1, cycle_s > 0 and refresh_s > 0 required")
        super().__init__()
        self.stack = stack
        self.view = view or ContainerView()
        self.fleet = fleet
        self.topics = topics or (
            (CONTAINERS_TOPIC, PORT_EVENTS_TOPIC)
            if fleet is None
            else (CONTAINERS_TOPIC, PORT_EVENTS_TOPIC, POSITIONS_TOPIC)
        )
        self.read_cap_per_s = read_cap_per_s
        self.cycle_s = cycle_s
        self.refresh_s = refresh_s
        self.pacer = CpuPacer(cpu_share)
        self.assigned: frozenset[tuple[str, int]] = frozenset()
        self.records_read = 0
        self._next: dict[tuple[str, int], int] = {}
        self._ends: dict[tuple[str, int], int] = {}
        self.lag_as_of: int | None = None  # wall-clock ms before the ends were last read

    def run(self, stop: threading.Event) -> None:
        consumer = Consumer(
            consumer_config(
                self.stack,
                f"streamsim-shipping-{uuid.uuid4().hex[:12]}",
                **{"logger": kafka_logger("live.kafka"), "enable.partition.eof": False},
            )
        )
        self.assigned = frozenset()
        self._next = {}
        try:
            next_refresh = 0.0
            while not stop.is_set():
                if time.monotonic() >= next_refresh:
                    self._refresh(consumer)
                    next_refresh = time.monotonic() + self.refresh_s
                if not self.assigned:
                    stop.wait(0.5)
                    continue
                self._cycle(consumer, stop)
        finally:
            consumer.close()

    def _refresh(self, consumer: Consumer) -> None:
        """Assign new partitions from their beginning; note every partition's end offset, and
        the time before they were read (`lag_as_of`) once all were."""
        as_of = time.time_ns() // 1_000_000
        try:
            metadata = consumer.list_topics(timeout=5.0).topics
            new = []
            for topic in self.topics:
                meta = metadata.get(topic)
                if meta is None or meta.error is not None:
                    continue  # not created yet
                for partition in meta.partitions:
                    key = (topic, partition)
                    low, high = consumer.get_watermark_offsets(
                        TopicPartition(topic, partition), timeout=5.0
                    )
                    if key not in self.assigned:
                        new.append(TopicPartition(topic, partition, OFFSET_BEGINNING))
                        self._next.setdefault(key, low)  # retention may have removed the start
                    self._ends[key] = high
        except KafkaException as exc:
            self.error = str(exc.args[0]) if exc.args else "cannot reach Kafka"
            return
        self.error = None
        self.lag_as_of = as_of
        if new:
            consumer.incremental_assign(new)
            self.assigned = self.assigned | {(tp.topic, tp.partition) for tp in new}

    def _cycle(self, consumer: Consumer, stop: threading.Event) -> None:
        started = time.monotonic()
        budget = max(1, int(self.read_cap_per_s * self.cycle_s))
        read = 0
        while read < budget:
            left = self.cycle_s - (time.monotonic() - started)
            if left <= 0:
                break
            messages = consumer.consume(min(500, budget - read), left)
            for msg in messages:
                err = msg.error()
                if err is not None:
                    self.error = err.str()
                    continue
                topic = msg.topic() or ""
                kind, at = msg.timestamp()
                emitted_at = at if kind else None
                record = json_object(msg.value())  # parsed once for both views
                if topic != POSITIONS_TOPIC:
                    self.view.add(topic, record, emitted_at)
                if self.fleet is not None:
                    self.fleet.add(topic, record, emitted_at)
                self._next[(topic, msg.partition() or 0)] = (msg.offset() or 0) + 1
                self.pacer.tick()
            read += len(messages)
        self.records_read += read
        if read >= budget:  # the budget is spent: idle until the cycle ends
            stop.wait(max(0.0, self.cycle_s - (time.monotonic() - started)))

    def lag(self) -> int:
        """Records behind the partitions' end offsets as of the last refresh (`lag_as_of`)."""
        return sum(max(0, end - self._next.get(key, 0)) for key, end in self._ends.items())

    def source(self) -> dict[str, Any]:
        return {
            "topics": list(self.topics),
            "partitions": len(self.assigned),
            "records_read": self.records_read,
            "lag": self.lag(),
            "lag_as_of": self.lag_as_of,
            "read_cap_per_s": self.read_cap_per_s,
            "error": self.error,
            **self.view.stats(),
        }
