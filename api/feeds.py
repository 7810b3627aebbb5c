"""What the read API shows of the topics: recent alerts, recent decisions, pipeline progress and
records/s per topic, kept in memory by two background threads.

- The tail thread is assigned every partition of `alerts`, the activity topic and `metrics`
  (no consumer group, nothing committed), starting `tail` records before each partition's end,
  and keeps the newest records in bounded ring buffers. Topics that appear later (a Spark job's
  first alert) are picked up within `refresh_s`. Activity records (the endpoint's decisions, at
  its full request rate) are kept as bytes and parsed only when read: a malformed one is
  counted then, if it is still among the newest.
- The vehicle thread reads `vehicles.telemetry` into a `VehicleView` (latest reading per
  vehicle, recent readings of a few hundred), at most `vehicle_read_cap_per_s` records/s,
  skipping ahead when the topic runs faster (see `api.vehicles`). Vehicle alerts from the tail
  are kept per vehicle there too.
- The rate thread asks the cluster for every topic's end offsets once per `sample_s` (one batched
  ListOffsets request) and turns the deltas into records/s (`RateTracker`).

What leaves here is projected field by field: an activity row carries the card token and last 4
digits, never more of the card (the topic has no PAN either; the projection makes sure nothing
else added to the record later reaches the UI by accident).
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

import orjson
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from api.kafkalog import kafka_logger
from api.vehicles import VEHICLES_TOPIC, VehicleTail, VehicleView
from core.config import StackConfig
from core.kafka import consumer_config
from core.kafka.clients import base_config

log = logging.getLogger("api.feeds")

ALERTS_TOPIC = "alerts"
METRICS_TOPIC = "metrics"
PROGRESS_SCHEMA = "pipeline.progress/1"

#: The `cards.activity` fields the UI may see.
ACTIVITY_FIELDS = (
    "transaction_id",
    "card_token",
    "card_last4",
    "event_time",
    "decided_at",
    "amount",
    "currency",
    "merchant_id",
    "channel",
    "country",
    "lat",
    "lon",
    "decision",
    "score",
    "reasons",
    "evidence",
)
ALERT_FIELDS = (
    "alert_id",
    "rule",
    "label",
    "entity_id",
    "event_time",
    "event_ids",
    "evidence",
    "source",
    "job",
    "detected_at",
)
PROGRESS_FIELDS = (
    "job",
    "mode",
    "query",
    "batch_id",
    "input_rows",
    "input_rows_per_s",
    "processed_rows_per_s",
    "watermark",
    "dropped_by_watermark",
    "late_events",
    "duration_ms",
    "at",
)


# -- parsing: pure functions of one record ----------------------------------------------------


def activity_row(record: Any) -> dict[str, Any] | None:
    """The UI's view of a `cards.activity` record; None if it is not one."""
    if not isinstance(record, dict) or not isinstance(record.get("card_token"), str):
        return None
    last4 = record.get("card_last4")
    if not isinstance(last4, str) or len(last4) != 4 or "decision" not in record:
        return None
    return {key: record.get(key) for key in ACTIVITY_FIELDS}


def alert_row(record: Any) -> dict[str, Any] | None:
    """An Alert row, `evidence` decoded from its JSON string; None if it is not one."""
    if not isinstance(record, dict) or not record.get("alert_id") or not record.get("rule"):
        return None
    row = {key: record.get(key) for key in ALERT_FIELDS}
    evidence = row["evidence"]
    if isinstance(evidence, str | bytes):
        try:
            row["evidence"] = orjson.loads(evidence)
        except orjson.JSONDecodeError:
            row["evidence"] = {"raw": evidence if isinstance(evidence, str) else evidence.decode()}
    return row


def progress_row(record: Any) -> dict[str, Any] | None:
    if not isinstance(record, dict) or record.get("schema") != PROGRESS_SCHEMA:
        return None
    if not record.get("query"):
        return None
    return {key: record.get(key) for key in PROGRESS_FIELDS}


def parse_watermark(value: Any) -> int | None:
    """Spark's watermark (ISO 8601, e.g. `2026-01-01T00:10:00.000Z`) as epoch ms."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return None


# -- the in-memory views ---------------------------------------------------------------------


class _Raw:
    """A record kept as it came (bytes) until a reader asks for it, then parsed once."""

    __slots__ = ("row", "value")

    def __init__(self, value: bytes) -> None:
        self.value: bytes | None = value
        self.row: dict[str, Any] | None = None


class RingBuffer:
    """The newest `size` rows; `recent(limit)` newest first by `key`, deduplicated by `id_key`
    (a replayed alert or decision shows once, its latest copy).

    With `parse`, `append_raw(value)` keeps a record's bytes and `parse` turns them into its
    row (None: not one) only when `recent` is called: a topic written thousands of times a
    second costs the tail a deque append per record, not a JSON parse, and only the `size`
    newest are ever parsed, once each."""

    def __init__(
        self,
        size: int,
        key: str,
        id_key: str,
        parse: Callable[[bytes], dict[str, Any] | None] | None = None,
    ) -> None:
        self.size = size
        self.key = key
        self.id_key = id_key
        self.parse = parse
        self._rows: deque[dict[str, Any] | _Raw] = deque(maxlen=size)
        self._lock = threading.Lock()
        self.seen = 0

    def append(self, row: dict[str, Any]) -> None:
        with self._lock:
            self._rows.append(row)
            self.seen += 1

    def append_raw(self, value: bytes) -> None:
        if self.parse is None:
            raise TypeError("append_raw needs a RingBuffer with parse")
        with self._lock:
            self._rows.append(_Raw(value))
            self.seen += 1

    def __len__(self) -> int:
        with self._lock:
            return len(self._rows)

    def recent(self, limit: int) -> list[dict[str, Any]]:
        with self._lock:  # held while parsing: each raw record is parsed exactly once
            rows = [row for row in map(self._resolve, self._rows) if row is not None]
        latest: dict[Any, dict[str, Any]] = {}
        for row in rows:  # oldest first: a later copy replaces an earlier one
            latest[row.get(self.id_key)] = row
        ordered = sorted(latest.values(), key=lambda r: _number(r.get(self.key)), reverse=True)
        return ordered[: max(0, limit)]

    def _resolve(self, entry: dict[str, Any] | _Raw) -> dict[str, Any] | None:
        if not isinstance(entry, _Raw):
            return entry
        if entry.value is not None and self.parse is not None:
            entry.row, entry.value = self.parse(entry.value), None
        return entry.row


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) else float("-inf")


class PipelineProgress:
    """The latest `pipeline.progress/1` report per query, plus totals over the reports seen."""

    def __init__(self) -> None:
        self._latest: dict[str, dict[str, Any]] = {}
        self._totals: dict[str, dict[str, int]] = {}
        self._lock = threading.Lock()

    def add(self, row: dict[str, Any]) -> None:
        query = str(row["query"])
        with self._lock:
            totals = self._totals.setdefault(
                query,
                {
                    "batches_seen": 0,
                    "input_rows_seen": 0,
                    "dropped_by_watermark_seen": 0,
                    "late_events_seen": 0,
                },
            )
            totals["batches_seen"] += 1
            totals["input_rows_seen"] += int(row.get("input_rows") or 0)
            totals["dropped_by_watermark_seen"] += int(row.get("dropped_by_watermark") or 0)
            late = row.get("late_events")  # reports before late_events: the operators' sum
            if late is None:
                late = row.get("dropped_by_watermark")
            totals["late_events_seen"] += int(late or 0)
            current = self._latest.get(query)
            if current is None or _number(row.get("at")) >= _number(current.get("at")):
                self._latest[query] = row

    def queries(self, now_ms: int) -> list[dict[str, Any]]:
        """Per query: the latest report, the watermark as epoch ms, how far it trails the
        report's processing time (`watermark_delay_s`), the report's age, and the totals."""
        with self._lock:
            items = [(q, dict(r), dict(self._totals[q])) for q, r in self._latest.items()]
        out = []
        for query, row, totals in sorted(items):
            watermark_ms = parse_watermark(row.get("watermark"))
            at = row.get("at")
            at_ms = int(at) if isinstance(at, int | float) else None
            out.append(
                {
                    **row,
                    "query": query,
                    "watermark_ms": watermark_ms,
                    "watermark_delay_s": None
                    if watermark_ms is None or at_ms is None
                    else round((at_ms - watermark_ms) / 1000, 3),
                    "report_age_s": None if at_ms is None else round((now_ms - at_ms) / 1000, 3),
                    **totals,
                }
            )
        return out


def job_summaries(queries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per job (from `queries()`): its queries, rows/s summed, the largest watermark delay, and
    late input rows counted once: a job's queries read the same input with the same watermark,
    so the most any of its queries dropped (`late_events_seen`), not their sum."""
    jobs: dict[str, dict[str, Any]] = {}
    for q in queries:
        job = str(q.get("job") or q["query"])
        summary = jobs.setdefault(
            job,
            {
                "job": job,
                "queries": 0,
                "modes": [],
                "input_rows_per_s": 0.0,
                "processed_rows_per_s": 0.0,
                "watermark_delay_s": None,
                "late_events_seen": 0,
            },
        )
        summary["queries"] += 1
        if q.get("mode") and q["mode"] not in summary["modes"]:
            summary["modes"].append(q["mode"])
        summary["input_rows_per_s"] += float(q.get("input_rows_per_s") or 0.0)
        summary["processed_rows_per_s"] += float(q.get("processed_rows_per_s") or 0.0)
        delay = q.get("watermark_delay_s")
        if delay is not None:
            known = summary["watermark_delay_s"]
            summary["watermark_delay_s"] = delay if known is None else max(known, delay)
        summary["late_events_seen"] = max(summary["late_events_seen"], q["late_events_seen"])
    return [jobs[name] for name in sorted(jobs)]


class RateTracker:
    """Records/s per topic from successive end-offset totals.

    `add(at_s, ends)` takes a sample (monotonic seconds, topic -> sum of partition end offsets);
    a topic's rate is the delta over the last two samples that both saw it. A total that went
    down (the topic was deleted and created again) counts as a fresh start, not a negative rate.
    """

    def __init__(self, history: int = 120) -> None:
        self._samples: deque[tuple[float, float, dict[str, int]]] = deque(maxlen=history + 1)
        self._lock = threading.Lock()

    def add(self, at_s: float, ends: Mapping[str, int], wall_ms: int | None = None) -> None:
        wall = time.time_ns() // 1_000_000 if wall_ms is None else wall_ms
        with self._lock:
            self._samples.append((at_s, float(wall), dict(ends)))

    @staticmethod
    def _between(
        a: tuple[float, float, dict[str, int]], b: tuple[float, float, dict[str, int]]
    ) -> dict[str, float]:
        dt = b[0] - a[0]
        if dt <= 0:
            return {}
        out = {}
        for topic, end in b[2].items():
            before = a[2].get(topic)
            if before is None:
                continue
            out[topic] = round(max(0, end - before) / dt, 3)
        return out

    def rates(self) -> dict[str, float]:
        with self._lock:
            samples = list(self._samples)
        return self._between(samples[-2], samples[-1]) if len(samples) >= 2 else {}

    def ends(self) -> dict[str, int]:
        with self._lock:
            return dict(self._samples[-1][2]) if self._samples else {}

    def sampled_at(self) -> int | None:
        with self._lock:
            return int(self._samples[-1][1]) if self._samples else None

    def history(self) -> list[dict[str, Any]]:
        """Oldest first: `{"at": epoch ms, "rates": {topic: records/s}}` per sample pair."""
        with self._lock:
            samples = list(self._samples)
        return [
            {"at": int(b[1]), "rates": self._between(a, b)} for a, b in itertools.pairwise(samples)
        ]


# -- the threads ------------------------------------------------------------------------------


class Feeds:
    def __init__(
        self,
        stack: StackConfig,
        activity_topic: str = "cards.activity",
        *,
        alerts_topic: str = ALERTS_TOPIC,
        metrics_topic: str = METRICS_TOPIC,
        vehicles_topic: str = VEHICLES_TOPIC,
        tail: int = 500,
        sample_s: float = 1.0,
        refresh_s: float = 3.0,
        vehicle_view: VehicleView | None = None,
        vehicle_read_cap_per_s: int = 5_000,
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
        self._parsers: dict[str, Callable[[Any], None]] = {
            alerts_topic: self._on_alert,
            metrics_topic: self._on_progress,
        }
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._guard(self._tail_loop), name="feeds-tail", daemon=True),
            threading.Thread(target=self._guard(self._rate_loop), name="feeds-rates", daemon=True),
            threading.Thread(
                target=self._guard(self._vehicle_loop), name="feeds-vehicles", daemon=True
            ),
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stop.set()
        for thread in self._threads:
            if thread.is_alive():
                thread.join(timeout_s)
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

    def _guard(self, loop: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            while not self._stop.is_set():
                try:
                    loop()
                    return
                except Exception as exc:  # keep the API up; retry after a pause
                    self.last_error = f"{type(exc).__name__}: {exc}"
                    log.warning("feed thread failed (%s); restarting", self.last_error)
                    self._stop.wait(2.0)

        return run

    def _tail_loop(self) -> None:
        config = consumer_config(
            self.stack,
            f"streamsim-feeds-{uuid.uuid4().hex[:12]}",
            **{"logger": kafka_logger(), "enable.partition.eof": False},
        )
        consumer = Consumer(config)
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
                    self._on_message(msg.topic() or "", msg.value())
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
        if new:
            consumer.incremental_assign(new)
            # Rebound, not updated in place: request threads iterate it.
            self.assigned = self.assigned | {(tp.topic, tp.partition) for tp in new}
        self.status = "live"
        self.last_error = None

    def _on_message(self, topic: str, value: bytes | None) -> None:
        if topic == self.activity_topic:
            self.activity.append_raw(value or b"")
            return
        parse = self._parsers.get(topic)
        if parse is None:
            return
        try:
            record = orjson.loads(value or b"")
        except orjson.JSONDecodeError:
            record = None
        parse(record)

    def _count_malformed(self, topic: str) -> None:
        self.malformed[topic] = self.malformed.get(topic, 0) + 1

    def _on_alert(self, record: Any) -> None:
        row = alert_row(record)
        if row is None:
            self._count_malformed(self.alerts_topic)
        else:
            self.alerts.append(row)
            self.vehicles.add_alert(row)

    def _parse_activity(self, value: bytes) -> dict[str, Any] | None:
        """The row of a raw activity record (when read), counting a malformed one."""
        try:
            record = orjson.loads(value)
        except orjson.JSONDecodeError:
            record = None
        row = activity_row(record)
        if row is None:
            self._count_malformed(self.activity_topic)
        return row

    def _on_progress(self, record: Any) -> None:
        row = progress_row(record)
        if row is None:
            return  # other schemas may share the metrics topic
        self.progress.add(row)

    def _vehicle_loop(self) -> None:
        self.vehicle_tail.run(self._stop)

    # -- rates ---------------------------------------------------------------------------------

    def _rate_loop(self) -> None:
        config: dict[str, Any] = {**base_config(self.stack), "logger": kafka_logger()}
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
