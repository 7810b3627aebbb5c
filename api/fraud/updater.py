"""The last-use updater: `cards.activity` -> the last-use state, in a background thread.

On start it reads every partition of the topic from the beginning (or, with a lookback, from
the first record appended within it) up to the end offsets it found (`rebuilt` is set then,
and the endpoint starts serving), and then keeps consuming, so
decisions made by other endpoint instances reach this one's state too. Records this endpoint
made itself were applied when it made them; they are skipped when they come back (by
transaction_id: a record whose `transaction_id` header names a transaction the state already
holds is skipped before its JSON is parsed; the endpoint's own records always are). Malformed
records are counted and skipped, never fatal.

Follow lag: for each record applied once live (another instance's decision), the time from
its producer timestamp (set when that instance published it) to its application here
(`follow_lag`, milliseconds): how long a card's decision on one instance stays unseen by the
others, the window in which a card's next request on another instance is judged on older
state. Clocks are the same machine's, or NTP-synchronised hosts'.

The consumer is assigned all partitions (no consumer group, nothing committed): every instance
holds the whole state, rebuilt from the topic on each start.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from typing import Any, Literal, Protocol, cast

import orjson
from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from hdrh.histogram import HdrHistogram

from api.fraud.decision import RECORD_KEYS
from api.fraud.publisher import TXID_HEADER
from api.fraud.state import LastUseState
from core.config import StackConfig
from core.kafka import consumer_config, ensure_topics
from core.kafka.follower import TopicFollower
from core.kafka.logger import kafka_logger

log = logging.getLogger("api.updater")

Status = Literal["starting", "rebuilding", "live", "stopped"]
Headers = list[tuple[str, str | bytes | None]] | dict[str, str | bytes | None] | None


class ActivityUpdater:
    def __init__(
        self,
        stack: StackConfig,
        topic: str,
        state: LastUseState,
        lookback_s: float | None = None,
    ) -> None:
        """`lookback_s`: rebuild from records appended that long before start-up or later
        (unset: the whole topic)."""
        self.stack = stack
        self.topic = topic
        self.state = state
        self.lookback_s = lookback_s
        self.status: Status = "starting"
        self.rebuilt = threading.Event()
        self.applied = 0  # records applied from the topic
        self.skipped = 0  # records already in (this endpoint's own decisions, repeats)
        self.malformed = 0
        self._lag = HdrHistogram(1, 3_600_000, 2)  # follow lag, ms
        self._lag_lock = threading.Lock()
        self.rebuild_s: float | None = None
        self.last_error: str | None = None
        self._stop = threading.Event()
        # `_run` keeps its own errors: no restart, health shows it stopped.
        self._thread = TopicFollower(self._run, name="updater", stop=self._stop, retry=False)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        self._thread.stop(timeout_s)
        self.status = "stopped"

    def _run(self, stop: threading.Event) -> None:
        started = time.monotonic()
        consumer = self._connect()
        if consumer is None:
            return
        try:
            pending = self._assign(consumer)
            self.status = "rebuilding"
            while not self._stop.is_set():
                if not pending and not self.rebuilt.is_set():
                    self.rebuild_s = round(time.monotonic() - started, 3)
                    self.status = "live"
                    self.last_error = None
                    self.rebuilt.set()
                    log.info(
                        "state rebuilt from %s: %d records in %.2f s",
                        self.topic,
                        self.applied,
                        self.rebuild_s,
                    )
                for msg in self._next_batch(consumer):
                    partition, offset, err = msg.partition() or 0, msg.offset() or 0, msg.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            pending.pop(partition, None)
                        else:
                            self.last_error = err.str()
                        continue
                    if not self._known(msg.headers()):
                        before = self.applied
                        self._apply(msg.value(), partition, offset)
                        if self.applied > before and self.rebuilt.is_set():
                            self._lagged(msg.timestamp())
                    end = pending.get(partition)
                    if end is not None and offset + 1 >= end:
                        del pending[partition]
        except Exception as exc:  # keep the endpoint up; health shows the updater stopped
            self.last_error = f"{type(exc).__name__}: {exc}"
            log.exception("updater stopped")
        finally:
            consumer.close()
            self.status = "stopped"

    def _next_batch(self, consumer: Consumer) -> list[Any]:
        """While rebuilding: up to 1,000 records. Once live: as soon as one record is there,
        it and up to 99 more already fetched (small batches: the event loop waits for the GIL
        while a batch is applied). `consume(n, timeout)` alone would wait for n records or
        the timeout, holding another instance's decision back up to 200 ms at a low rate."""
        if not self.rebuilt.is_set():
            return list(consumer.consume(1000, 0.2))
        first = consumer.poll(0.2)
        if first is None:
            return []
        return [first, *consumer.consume(99, 0)]

    def _connect(self) -> Consumer | None:
        """A consumer, once Kafka answers and the topic exists (created if missing); retries
        until stopped."""
        config = consumer_config(
            self.stack,
            f"streamsim-api-{uuid.uuid4().hex[:12]}",
            **{"enable.partition.eof": True, "logger": kafka_logger("api.kafka")},
        )
        consumer = Consumer(config)
        while not self._stop.is_set():
            try:
                if self.topic not in consumer.list_topics(timeout=5.0).topics:
                    ensure_topics(self.stack, [self.topic], timeout_s=10.0)
                return consumer
            except (KafkaException, TimeoutError) as exc:
                self._retrying("cannot reach Kafka", exc)
                self._stop.wait(1.0)
        consumer.close()
        return None

    def _retrying(self, what: str, exc: Exception) -> None:
        error = str(exc.args[0]) if exc.args else type(exc).__name__
        if error != self.last_error:  # say it once, not once a second
            log.warning("%s (%s); retrying", what, error)
        self.last_error = error

    def _assign(self, consumer: Consumer) -> dict[int, int]:
        """Assign every partition from where the rebuild starts; returns partition -> end
        offset for the partitions that hold records to rebuild from."""
        since_ms = None
        if self.lookback_s is not None:
            since_ms = round(time.time() * 1000 - self.lookback_s * 1000)
        while True:
            try:
                meta = consumer.list_topics(self.topic, timeout=10.0).topics[self.topic]
                if meta.error is not None:
                    raise KafkaException(meta.error)
                starts = self._starts(consumer, sorted(meta.partitions), since_ms)
                pending = {}
                for tp in starts:
                    low, high = consumer.get_watermark_offsets(tp, timeout=10.0)
                    start = low if tp.offset == OFFSET_BEGINNING else tp.offset
                    if 0 <= start < high:
                        pending[tp.partition] = high
                break
            except KafkaException as exc:
                self._retrying(f"cannot read the offsets of {self.topic} yet", exc)
                if self._stop.wait(1.0):
                    return {}
        consumer.assign(starts)
        return pending

    def _starts(
        self, consumer: Consumer, partitions: list[int], since_ms: int | None
    ) -> list[TopicPartition]:
        """Where each partition's rebuild starts: its beginning, or (with a lookback) the
        first record appended at `since_ms` or later (none: its end)."""
        if since_ms is None:
            return [TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in partitions]
        wanted = [TopicPartition(self.topic, p, since_ms) for p in partitions]
        found = consumer.offsets_for_times(wanted, timeout=10.0)
        return [
            tp if tp.offset >= 0 else TopicPartition(self.topic, tp.partition, OFFSET_END)
            for tp in found
        ]

    def _known(self, headers: Headers) -> bool:
        """Whether the record's `transaction_id` header names a transaction already in (then
        it is counted as skipped). Without the lock: a read of the verdict cache's dict, atomic
        under the GIL; a record not known here goes through `_apply`, which checks again under
        the lock."""
        if not headers:
            return False
        for name, value in headers.items() if isinstance(headers, dict) else headers:
            if name == TXID_HEADER and value is not None:
                txid = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
                if txid in self.state.verdicts:
                    self.skipped += 1
                    return True
                return False
        return False

    def _lagged(self, timestamp: tuple[int, int]) -> None:
        kind, at_ms = timestamp
        if kind == TIMESTAMP_NOT_AVAILABLE:
            return
        lag = max(1, time.time_ns() // 1_000_000 - at_ms)
        with self._lag_lock:
            self._lag.record_value(min(lag, 3_600_000))

    def follow_lag(self) -> dict[str, float | int]:
        """Follow lag of the records applied once live (ms; see the module docstring)."""
        with self._lag_lock:
            h = self._lag
            if not h.get_total_count():
                return {"count": 0}
            return {
                "count": h.get_total_count(),
                "p50": h.get_value_at_percentile(50),
                "p99": h.get_value_at_percentile(99),
                "max": h.get_max_value(),
            }

    def _apply(self, value: bytes | None, partition: int, offset: int) -> None:
        try:
            record: dict[str, Any] = orjson.loads(value or b"")
            if not isinstance(record, dict) or any(k not in record for k in RECORD_KEYS):
                raise ValueError("not a cards.activity record")
            with self.state.lock:
                if self.state.knows(record["transaction_id"]):
                    self.skipped += 1
                    return
                # The verdict body is built from the bytes only if a retry asks for it.
                self.state.apply(record, value or b"", is_body=False)
            self.applied += 1
        except (ValueError, TypeError, KeyError) as exc:
            self.malformed += 1
            log.warning(
                "skipped malformed record %s[%d]@%d: %s",
                self.topic,
                partition,
                offset,
                type(exc).__name__,
            )


class RecordStore(Protocol):
    def put(self, record: dict[str, Any]) -> None: ...


class RecordUpdater(ActivityUpdater):
    """The last-use updater's consumer loop applying a topic's JSON objects to `store`
    (`put`) instead of decisions to a last-use state; anything else counts as malformed."""

    def __init__(
        self,
        stack: StackConfig,
        topic: str,
        store: RecordStore,
        name: str,
        lookback_s: float | None = None,
    ) -> None:
        super().__init__(stack, topic, cast(LastUseState, None), lookback_s)
        self.store = store
        self._thread.name = name

    def _known(self, headers: Headers) -> bool:
        return False

    def _apply(self, value: bytes | None, partition: int, offset: int) -> None:
        try:
            record = orjson.loads(value or b"")
            if not isinstance(record, dict):
                raise ValueError("not an object")
            self.store.put(record)
            self.applied += 1
        except (ValueError, TypeError, KeyError):
            self.malformed += 1
