"""`SensorFeed`: the thread that reads `sensors.readings` into a `SensorView`, with the vehicle
feed's tail (`VehicleTail`: at most `read_cap_per_s` records/s, skipping ahead on a faster topic,
its Python work paced), so a 20,000-sensor run costs the API process a bounded share of a core
and of the GIL it shares with the fraud endpoint; beside it, the sensors' estimated clock
offsets from the compacted `sensors.clock-offsets` (`live.consumers.clock`)."""

from __future__ import annotations

import threading
from typing import Any

from core.config import StackConfig
from core.contracts import topics
from core.kafka.follower import TopicFollower
from live.consumers.clock import OffsetsFeed
from live.consumers.vehicles import VehicleTail
from live.views.sensors import SENSORS_TOPIC, SensorView


class SensorFeed(TopicFollower):
    """The sensor view and the thread that fills it; `start()`/`stop()` run the thread."""

    thread_name = "sensor-feed"

    def __init__(
        self,
        stack: StackConfig,
        view: SensorView | None = None,
        *,
        topic: str = SENSORS_TOPIC,
        read_cap_per_s: int = 2_000,
        refresh_s: float = 3.0,
        clock_topic: str = topics.clock_offsets("sensors").name,
    ) -> None:
        super().__init__()
        self.view = view or SensorView()
        self.tail = VehicleTail(
            stack, topic, self.view, read_cap_per_s=read_cap_per_s, refresh_s=refresh_s
        )
        #: The sensors' estimated clock offsets (`sensors.clock-offsets`, compacted).
        self.clock = OffsetsFeed(stack, clock_topic)

    def start(self) -> None:
        super().start()
        self.clock.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        self.clock.stop(timeout_s)
        super().stop(timeout_s)

    def run(self, stop: threading.Event) -> None:
        self.tail.run(stop)

    def source(self) -> dict[str, Any]:
        """How the feed is doing: partitions, its read budget and skips, the view's counts."""
        return {
            "topic": self.tail.topic,
            "partitions": len(self.tail.partitions),
            "error": self.tail.error or self.error,
            **self.tail.sampling(),
            **self.view.stats(),
        }
