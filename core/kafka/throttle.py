"""librdkafka's `throttle_cb`: when a broker delays a client's requests (a client quota, such
as `producer_byte_rate`), say so once per spell and count it, instead of slowing down silently.

librdkafka calls back (from `poll`/`flush`) with each throttled response's delay, and with 0
once a broker stops throttling.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from confluent_kafka import ThrottleEvent


class ThrottleWatch:
    """A `throttle_cb` for client `client`; `warn` gets one line when a throttling spell
    starts, `say` one when it ends; `summary()` gives the counts."""

    def __init__(
        self, client: str, warn: Callable[[str], None], say: Callable[[str], None]
    ) -> None:
        self.client = client
        self.warn = warn
        self.say = say
        self.events = 0  # throttled responses
        self.total_ms = 0  # their delays added up
        self.max_ms = 0
        self.spells = 0
        self._throttled = False
        self._lock = threading.Lock()

    def __call__(self, event: ThrottleEvent) -> None:
        ms = round(event.throttle_time * 1000)
        with self._lock:
            if ms <= 0:
                if self._throttled:
                    self._throttled = False
                    self.say(f"{self.client}: Kafka no longer throttles it ({self.summary_text()})")
                return
            self.events += 1
            self.total_ms += ms
            self.max_ms = max(self.max_ms, ms)
            if not self._throttled:
                self._throttled = True
                self.spells += 1
                self.warn(
                    f"Kafka throttles {self.client} (broker {event.broker_name} "
                    f"delays its requests {ms} ms: a client quota); it goes on at that pace"
                )

    def summary_text(self) -> str:
        return f"{self.events} throttled responses, {self.total_ms} ms in all, max {self.max_ms}"

    def summary(self) -> dict[str, Any]:
        """`{"events", "total_ms", "max_ms", "spells"}` (all 0: never throttled)."""
        with self._lock:
            return {
                "events": self.events,
                "total_ms": self.total_ms,
                "max_ms": self.max_ms,
                "spells": self.spells,
            }
