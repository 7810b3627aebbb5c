"""The threads behind the read API's feeds: they consume the topics into the views of
`live.views.feeds` and `live.views.vehicles`.

- The tail thread is assigned every partition of `alerts`, the activity topic and `metrics`
  (no consumer group, nothing committed), starting `tail` records before each partition's end,
  and keeps the newest records in bounded ring buffers. Topics that appear later (a Spark job's
  first alert) are picked up within `refresh_s`. Activity records (the endpoint's decisions, at
  its full request rate) are kept as bytes and parsed only when read: a malformed one is
  counted then, if it is still among the newest.
- The clock thread reads the compacted `vehicles.clock-offsets` whole into an `OffsetTable`
  (`live.consumers.clock`): each vehicle's estimated clock offset.
- The vehicle thread reads `vehicles.telemetry` into a `VehicleView` (latest reading per
  vehicle, recent readings of a few hundred), at most `vehicle_read_cap_per_s` records/s,
  skipping ahead when the topic runs faster (see `live.consumers.vehicles`). Vehicle
  alerts from the tail are kept per vehicle there too.
- The same thread publishes each new alert and progress record, with its partition and offset,
  to an `EventLog` (`alert_stream`, `progress_stream`, see `live.views.stream`): what the
  server-sent-event routes push to their clients.
- The rate thread asks the cluster for every topic's end offsets once per `sample_s` (one batched
  ListOffsets request) and turns the deltas into records/s (`RateTracker`).

The tail and vehicle threads pace their Python work to a share of a core in short slices
(`live.consumers.pacing`): they share the GIL with the fraud endpoint.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from core.config import StackConfig
from core.contracts import topics
from core.kafka import consumer_config
from core.kafka.clients import base_config
from core.kafka.follower import TopicFollower
from core.kafka.logger import kafka_logger
from live.consumers.clock import OffsetsFeed
from live.consumers.pacing import CpuPacer
from live.consumers.vehicles import VehicleTail
from live.views.feeds import (
    ALERTS_TOPIC,
    METRICS_TOPIC,
    PipelineProgress,
    RateTracker,
    RingBuffer,
    activity_row,
    alert_row,
    progress_row,
)
from live.views.records import json_object
from live.views.stream import EventLog
from live.views.vehicles import VEHICLES_TOPIC, VehicleView

log = logging.getLogger("live.feeds")


# -- the threads ------------------------------------------------------------------------------


class Feeds:
    def __init__(
        self,
        stack: StackConfig,
        activity_topic: str = topics.CARDS_ACTIVITY.name,
        *,
        alerts_topic: str = ALERTS_TOPIC,
        metrics_topic: str = METRICS_TOPIC,
        vehicles_topic: str = VEHICLES_TOPIC,
        tail: int = 500,
        sample_s: float = 1.0,
        refresh_s: float = 3.0,
        vehicle_view: VehicleView | None = None,
        vehicle_read_cap_per_s: int = 5_000,
        stream_keep: int = 1000,
    ) -> None:
        self.stack = stack
        self.alerts_topic = alerts_topic
        self.activity_topic = activity_topic
        self.metrics_topic = metrics_topic
        self.vehicles_topic = vehicles_topic
        self.tail = tail
        self.sample_s = sample_s
        self.refresh_s = refresh_s
        self.alerts = RingBuffer(tail, key="detected_at", id_key="alert_id")
        # Kept raw, parsed when read: the endpoint's own decisions come back here at its
        # full request rate.
        self.activity = RingBuffer(
            tail, key="decided_at", id_key="transaction_id", parse=self._parse_activity
        )
        self.progress = PipelineProgress()
        #: Every new alert and progress record, with its Kafka position, for the SSE routes.
        self.alert_stream = EventLog(stream_keep)
        self.progress_stream = EventLog(stream_keep)
        self.streams = {alerts_topic: self.alert_stream, metrics_topic: self.progress_stream}
        self.rates = RateTracker()
        self.vehicles = vehicle_view or VehicleView()
        self.vehicle_tail = VehicleTail(
            stack,
            vehicles_topic,
            self.vehicles,
            read_cap_per_s=vehicle_read_cap_per_s,
            refresh_s=refresh_s,
        )
        self.malformed: dict[str, int] = {}
        self.assigned: set[tuple[str, int]] = set()
        self.status = "starting"
        self.last_error: str | None = None
        self._parsers: dict[str, Callable[[Any], dict[str, Any] | None]] = {
            alerts_topic: self._on_alert,
            metrics_topic: self._on_progress,
        }
        self._stop = threading.Event()
        self._threads = [
            TopicFollower(
                self._tail_loop, name="feeds-tail", stop=self._stop, on_error=self._failed
            ),
            TopicFollower(
                self._rate_loop, name="feeds-rates", stop=self._stop, on_error=self._failed
            ),
            TopicFollower(
                self._vehicle_loop, name="feeds-vehicles", stop=self._stop, on_error=self._failed
            ),
        ]
        #: The vehicles' estimated clock offsets (`vehicles.clock-offsets`, compacted).
        self.vehicle_clock = OffsetsFeed(
            stack, topics.clock_offsets("vehicles").name, stop=self._stop
        )
        self._threads.append(self.vehicle_clock)

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.stop(timeout_s)
        self.status = "stopped"

    def source(self, topic: str) -> dict[str, Any]:
        """How a feed is doing: for the responses, so the UI can tell 'nothing yet' from
        'cannot read'."""
        if topic == self.vehicles_topic:
            partitions = len(self.vehicle_tail.partitions)
        else:
            partitions = sum(1 for t, _ in self.assigned if t == topic)
        return {
            "topic": topic,
            "status": self.status,
            "partitions": partitions,
            "error": self.last_error
            or (self.vehicle_tail.error if topic == self.vehicles_topic else None),
        }

    # -- tail ----------------------------------------------------------------------------------

    def _failed(self, error: str) -> None:
        """A feed thread's failure: shown in `source`; the thread restarts."""
        self.last_error = error
        log.warning("feed thread failed (%s); restarting", error)

    def _tail_loop(self, stop: threading.Event) -> None:
        config = consumer_config(
            self.stack,
            f"streamsim-feeds-{uuid.uuid4().hex[:12]}",
            **{"logger": kafka_logger("live.kafka"), "enable.partition.eof": False},
        )
        consumer = Consumer(config)
        pacer = CpuPacer()
        self.assigned = set()
        try:
            next_refresh = 0.0
            while not self._stop.is_set():
                if time.monotonic() >= next_refresh:
                    self._assign_new(consumer)
                    next_refresh = time.monotonic() + self.refresh_s
                if not self.assigned:
                    self._stop.wait(0.5)
                    continue
                for msg in consumer.consume(200, 0.5):
                    err = msg.error()
                    if err is not None:
                        self.last_error = err.str()
                        continue
                    self._on_message(msg.topic() or "", msg.value(), msg.partition(), msg.offset())
                    pacer.tick()
        finally:
            consumer.close()

    def _assign_new(self, consumer: Consumer) -> None:
        try:
            topics = consumer.list_topics(timeout=5.0).topics
        except KafkaException as exc:
            self.status = "waiting for Kafka"
            self.last_error = str(exc.args[0]) if exc.args else "cannot reach Kafka"
            return
        new = []
        for topic in (self.alerts_topic, self.activity_topic, self.metrics_topic):
            meta = topics.get(topic)
            if meta is None or meta.error is not None:
                continue
            for partition in meta.partitions:
                if (topic, partition) in self.assigned:
                    continue
                low, high = consumer.get_watermark_offsets(
                    TopicPartition(topic, partition), timeout=5.0
                )
                start = max(low, high - self.tail)
                new.append(TopicPartition(topic, partition, start))
                stream = self.streams.get(topic)
                if stream is not None:
                    stream.cover(partition, start)
        if new:
            consumer.incremental_assign(new)
            # Rebound, not updated in place: request threads iterate it.
            self.assigned = self.assigned | {(tp.topic, tp.partition) for tp in new}
        self.status = "live"
        self.last_error = None

    def _on_message(
        self,
        topic: str,
        value: bytes | None,
        partition: int | None = None,
        offset: int | None = None,
    ) -> None:
        """One record; an alert or progress row read at a known `partition` and `offset` is
        published to its stream too."""
        if topic == self.activity_topic:
            self.activity.append_raw(value or b"")
            return
        parse = self._parsers.get(topic)
        if parse is None:
            return
        row = parse(json_object(value))
        stream = self.streams.get(topic)
        if stream is None or partition is None or offset is None or offset < 0:
            return
        if row is None:
            stream.advance(partition, offset)
        else:
            stream.publish(partition, offset, row)

    def _count_malformed(self, topic: str) -> None:
        self.malformed[topic] = self.malformed.get(topic, 0) + 1

    def _on_alert(self, record: Any) -> dict[str, Any] | None:
        row = alert_row(record)
        if row is None:
            self._count_malformed(self.alerts_topic)
        else:
            self.alerts.append(row)
            self.vehicles.add_alert(row)
        return row

    def _parse_activity(self, value: bytes) -> dict[str, Any] | None:
        """The row of a raw activity record (when read), counting a malformed one."""
        row = activity_row(json_object(value))
        if row is None:
            self._count_malformed(self.activity_topic)
        return row

    def _on_progress(self, record: Any) -> dict[str, Any] | None:
        row = progress_row(record)
        if row is None:
            return None  # other schemas may share the metrics topic
        self.progress.add(row)
        return row

    def _vehicle_loop(self, stop: threading.Event) -> None:
        self.vehicle_tail.run(self._stop)

    # -- rates ---------------------------------------------------------------------------------

    def _rate_loop(self, stop: threading.Event) -> None:
        config: dict[str, Any] = {**base_config(self.stack), "logger": kafka_logger("live.kafka")}
        admin = AdminClient(config)
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                ends = end_offset_totals(admin, timeout_s=max(1.0, 2 * self.sample_s))
            except KafkaException as exc:
                self.last_error = str(exc.args[0]) if exc.args else "cannot reach Kafka"
            else:
                self.rates.add(started, ends)
            self._stop.wait(max(0.0, self.sample_s - (time.monotonic() - started)))


def end_offset_totals(admin: AdminClient, timeout_s: float = 2.0) -> dict[str, int]:
    """Topic -> sum of its partitions' end offsets, for every topic not starting with `_`."""
    metadata = admin.list_topics(timeout=timeout_s).topics
    request = {
        TopicPartition(name, p): OffsetSpec.latest()
        for name, meta in metadata.items()
        if not name.startswith("_") and meta.error is None
        for p in meta.partitions
    }
    if not request:
        return {}
    totals: dict[str, int] = {}
    incomplete: set[str] = set()
    futures = admin.list_offsets(request, request_timeout=timeout_s)
    for tp, future in futures.items():
        try:
            offset = future.result().offset
        except KafkaException:
            incomplete.add(tp.topic)  # e.g. no leader right now: a partial sum would jump
            continue
        totals[tp.topic] = totals.get(tp.topic, 0) + max(0, offset)
    return {topic: n for topic, n in totals.items() if topic not in incomplete}
