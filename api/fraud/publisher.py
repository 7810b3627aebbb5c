"""Publishing decisions to `cards.activity` without ever blocking a request.

`KafkaPublisher.publish` only enqueues (librdkafka's `produce` is asynchronous). librdkafka's
callbacks are served with `poll`: in the endpoint, by a non-blocking `poll(0)` on the event loop
every `POLL_INTERVAL_S` (`start(loop)`); a thread blocked in `poll` would wake for every batch
librdkafka sends and take the GIL from the busy event loop each time (at saturation that costs more
CPU per request than the produce call itself). Without a loop, `start()` starts a background poll
thread instead. Only failed deliveries get a delivery report (no Python callback per record):
`delivered` is what was sent minus what librdkafka still holds minus the failures. Records linger
up to `LINGER_MS` (100 ms) to be batched: smaller batches cost the producer and every consumer of
the topic (the updater's, the read API's) more CPU per request, and a short linger at saturation
makes librdkafka's broker thread busy-poll (figures in the CHANGELOG). The price: a decision
reaches the topic (other instances' state, the read API, Spark) up to 100 ms later; the request
itself never waits for it. While Kafka is unreachable, records wait in librdkafka's queue and are
retried until `message.timeout.ms`; whatever still fails is counted (`failed`, `last_error`) and
logged, never dropped silently. A broker that throttles the publisher (a client quota) is
logged when it starts and stops (`core.kafka.throttle`). Records never hold a PAN.

With `reports=True` (durability `ack` or `log`, see `api.fraud.durability`) every record gets a
delivery report, and `publish(..., on_acked=cb)` calls `cb(None)` once the broker has
acknowledged the record, or `cb(reason)` once it failed (from the thread that polls: the poll
thread with `start(loop, thread=True)`, else the event loop). Durability `ack` answers after
that callback, so it polls from a thread (`poll(0.1)` wakes as soon as a report arrives) and
lingers `ACK_LINGER_MS` only.

Each record carries its transaction id in the `transaction_id` header (`TXID_HEADER`), so the
updater can skip the endpoint's own records as they come back without parsing them.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from core.config import StackConfig
from core.kafka import producer_config
from core.kafka.logger import kafka_logger
from core.kafka.throttle import ThrottleWatch

log = logging.getLogger("api.publisher")

#: The record header holding the record's transaction_id (UTF-8).
TXID_HEADER = "transaction_id"
#: How long librdkafka holds records to batch them (see above).
LINGER_MS = 100
#: The linger when each answer waits for its record's acknowledgement (durability `ack`):
#: long enough to batch a burst, short against the broker's round trip.
ACK_LINGER_MS = 2
#: How often the event loop serves librdkafka's callbacks (failed deliveries, errors, logs).
POLL_INTERVAL_S = 0.1

#: Called once per record: None when the broker acknowledged it, else why it failed.
OnAcked = Callable[[str | None], None]


class Publisher(Protocol):
    def start(
        self, loop: asyncio.AbstractEventLoop | None = None, thread: bool = False
    ) -> None: ...

    def publish(
        self, key: str, value: bytes, transaction_id: str, on_acked: OnAcked | None = None
    ) -> None: ...

    def flush(self, timeout_s: float) -> int: ...

    def poll_now(self) -> None: ...

    def counters(self) -> dict[str, Any]: ...

    def connected(self) -> bool: ...

    def close(self, timeout_s: float) -> int: ...


class KafkaPublisher:
    def __init__(
        self,
        stack: StackConfig,
        topic: str,
        *,
        reports: bool = False,
        linger_ms: int = LINGER_MS,
    ) -> None:
        self.topic = topic
        self.bootstrap = stack.kafka.bootstrap_servers
        self.sent = 0  # enqueued (event loop thread)
        self.failed = 0  # rejected at enqueue, failed delivery, or left at shutdown
        self._failed_deliveries = 0  # (the poll: event loop or poll thread)
        self.last_error: str | None = None
        self._probe: tuple[float, bool] = (0.0, False)
        self._stop = threading.Event()
        self.throttle = ThrottleWatch(f"the publisher to {topic}", log.warning, log.info)
        self._producer = Producer(
            producer_config(
                stack,
                **{
                    "client.id": "streamsim-api",
                    "linger.ms": linger_ms,
                    "delivery.report.only.error": not reports,
                    "on_delivery": self._on_delivery,
                    "error_cb": self._on_error,
                    "throttle_cb": self.throttle,
                    "logger": kafka_logger("api.kafka"),
                },
            )
        )
        self._thread = threading.Thread(target=self._poll_loop, name="publisher", daemon=True)
        self._loop: asyncio.AbstractEventLoop | None = None
        #: Called by the poll thread after each poll (the acks' hand-over to the event loop).
        self.after_poll: Callable[[], None] | None = None

    def start(self, loop: asyncio.AbstractEventLoop | None = None, thread: bool = False) -> None:
        """Serve callbacks on `loop` (call from its thread), else (or with `thread`) in a poll
        thread."""
        if loop is None or thread:
            self._thread.start()
        else:
            self._loop = loop
            loop.call_soon(self._poll_tick)

    def _poll_tick(self) -> None:
        if self._stop.is_set() or self._loop is None:
            return
        self._producer.poll(0)
        self._loop.call_later(POLL_INTERVAL_S, self._poll_tick)

    def publish(
        self, key: str, value: bytes, transaction_id: str, on_acked: OnAcked | None = None
    ) -> None:
        headers: list[tuple[str, str | bytes | None]] = [(TXID_HEADER, transaction_id)]
        try:
            if on_acked is None:
                self._producer.produce(self.topic, value, key, headers=headers)
            else:
                self._producer.produce(
                    self.topic, value, key, headers=headers, on_delivery=self._reporter(on_acked)
                )
        except BufferError:
            reason = "local queue full (Kafka unreachable for long?)"
        except KafkaException as exc:
            reason = str(exc.args[0])
        else:
            self.sent += 1
            return
        self._fail(reason)
        if on_acked is not None:
            on_acked(reason)

    def _reporter(self, on_acked: OnAcked) -> Callable[[KafkaError | None, Message], None]:
        def report(err: KafkaError | None, msg: Message) -> None:
            if err is None:
                on_acked(None)
                return
            self._on_delivery(err, msg)
            on_acked(err.str())

        return report

    def flush(self, timeout_s: float) -> int:
        """Wait (blocking) until librdkafka holds nothing or `timeout_s`; what it still holds."""
        return int(self._producer.flush(timeout_s))

    def poll_now(self) -> None:
        """Serve the callbacks librdkafka has ready, without waiting."""
        self._producer.poll(0)

    @property
    def delivered(self) -> int:
        return self._delivered(self._queued())

    def _queued(self) -> int:
        """Records librdkafka still holds. Its count includes callbacks not served yet (e.g.
        connection errors while Kafka is down): serve them first, the event loop's poll may
        be up to `POLL_INTERVAL_S` away."""
        self._producer.poll(0)
        return len(self._producer)

    def _delivered(self, queued: int) -> int:
        """Acknowledged by the broker: sent, minus what librdkafka still holds (`queued`: in
        flight or waiting), minus failed deliveries."""
        return max(0, self.sent - queued - self._failed_deliveries)

    def counters(self) -> dict[str, Any]:
        queued = self._queued()
        return {
            "sent": self.sent,
            "delivered": self._delivered(queued),
            "failed": self.failed,
            "queued": queued,
            "last_error": self.last_error,
        }

    def connected(self, timeout_s: float = 1.0, max_age_s: float = 1.0) -> bool:
        """A metadata request answered within `timeout_s` (cached for `max_age_s`); blocks."""
        at, ok = self._probe
        if time.monotonic() - at < max_age_s:
            return ok
        try:
            self._producer.list_topics(self.topic, timeout=timeout_s)
            ok = True
        except KafkaException:
            ok = False
        self._probe = (time.monotonic(), ok)
        return ok

    def close(self, timeout_s: float) -> int:
        """Stop polling and flush (from any thread); returns the records left undelivered
        (also logged)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        left = int(self._producer.flush(timeout_s))
        if left:
            self.failed += left
            log.error("%d records to %s not delivered at shutdown", left, self.topic)
        return left

    def _fail(self, reason: str) -> None:
        self.failed += 1
        self.last_error = reason
        log.warning("publish to %s failed: %s", self.topic, reason)

    def _on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:  # always: successful deliveries are not reported
            self._failed_deliveries += 1
            self._fail(err.str())

    def _on_error(self, err: KafkaError) -> None:
        # Connection trouble is retried by librdkafka; health probes connectivity itself.
        self.last_error = err.str()

    def _poll_loop(self) -> None:
        while not self._stop.is_set():
            self._producer.poll(0.1)
            if self.after_poll is not None:
                self.after_poll()


class MemoryPublisher:
    """Keeps what it is given (unit tests, and runs without Kafka)."""

    def __init__(self) -> None:
        self.records: list[tuple[str, bytes]] = []
        self.headers: list[list[tuple[str, bytes]]] = []  # per record, as a consumer gets them

    def start(self, loop: asyncio.AbstractEventLoop | None = None, thread: bool = False) -> None:
        pass

    def publish(
        self, key: str, value: bytes, transaction_id: str, on_acked: OnAcked | None = None
    ) -> None:
        self.records.append((key, value))
        self.headers.append([(TXID_HEADER, transaction_id.encode())])
        if on_acked is not None:
            on_acked(None)

    def flush(self, timeout_s: float) -> int:
        return 0

    def poll_now(self) -> None:
        pass

    def counters(self) -> dict[str, Any]:
        n = len(self.records)
        return {"sent": n, "delivered": n, "failed": 0, "queued": 0, "last_error": None}

    def connected(self) -> bool:
        return True

    def close(self, timeout_s: float) -> int:
        return 0
