"""The vehicle feed's tail on a real broker: under its read cap it reads everything; on a topic
far ahead of the cap it reads at most its budget per cycle and jumps ahead to the newest
records, so the view shows the latest readings and stays bounded."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from confluent_kafka import Consumer, Producer

from core.config import StackConfig
from core.kafka import ensure_topics, producer_config
from live.consumers.vehicles import VehicleTail
from live.views.vehicles import VehicleView

pytestmark = pytest.mark.integration

T0 = 1_772_524_800_000


def produce(stack: StackConfig, topic: str, vehicles: int, rounds: int) -> None:
    """`rounds` readings of each vehicle, seq 0..rounds-1, in seq order per vehicle."""
    producer = Producer(producer_config(stack, **{"linger.ms": 20}))
    for seq in range(rounds):
        for v in range(vehicles):
            vid = f"veh-{v:06d}"
            record = {
                "schema": "vehicle.telemetry/1",
                "event_id": f"cv-{v}-{seq}",
                "vehicle_id": vid,
                "event_time": T0 + seq * 1000,
                "seq": seq,
                "lat": 50.0 + v * 0.001,
                "lon": 9.0 + seq * 0.0001,
                "speed_kmh": 90.0,
                "coolant_c": 90.0 + seq % 3,
            }
            while True:
                try:
                    producer.produce(topic, orjson.dumps(record), vid.encode())
                    break
                except BufferError:
                    producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(60) == 0


class CountedTail(VehicleTail):
    """A tail that keeps how many records each of its read cycles read."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cycles: list[int] = []

    def _cycle(self, consumer: Consumer, stop: threading.Event) -> None:
        before = self.records_read
        super()._cycle(consumer, stop)
        self.cycles.append(self.records_read - before)


def running(tail: VehicleTail) -> Iterator[threading.Event]:
    stop = threading.Event()
    thread = threading.Thread(target=tail.run, args=(stop,), daemon=True)
    thread.start()
    try:
        yield stop
    finally:
        stop.set()
        thread.join(15)


def wait_for(check: object, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise AssertionError("timed out")


def test_below_the_cap_every_reading_arrives(kafka_stack: StackConfig) -> None:
    topic = f"vehicles.telemetry-feed-{uuid.uuid4().hex[:8]}"
    ensure_topics(kafka_stack, [topic])
    produce(kafka_stack, topic, vehicles=20, rounds=10)  # 200 records
    view = VehicleView(history_len=50)
    tail = VehicleTail(kafka_stack, topic, view, read_cap_per_s=5000, refresh_s=0.5)
    for _ in running(tail):
        wait_for(lambda: view.readings == 200)
    assert tail.records_skipped == 0 and tail.records_read == 200
    rows, counts = view.vehicles(time.time_ns() // 1_000_000, limit=100)
    assert len(rows) == 20 and counts["moving"] == 20
    assert all(r["seq"] == 9 for r in rows)
    found = view.telemetry("veh-000003", time.time_ns() // 1_000_000, 100, ("coolant_c",))
    assert found is not None and [r["seq"] for r in found["readings"]] == list(range(10))


def test_a_topic_far_ahead_of_the_cap_is_skipped_not_read(kafka_stack: StackConfig) -> None:
    topic = f"vehicles.telemetry-feed-{uuid.uuid4().hex[:8]}"
    ensure_topics(kafka_stack, [topic])
    vehicles, rounds = 500, 120  # 60,000 records already there
    produce(kafka_stack, topic, vehicles, rounds)
    view = VehicleView(max_vehicles=400, history_vehicles=50, history_len=20)
    tail = CountedTail(
        kafka_stack,
        topic,
        view,
        read_cap_per_s=2000,
        cycle_s=0.5,
        start_back=20_000,  # start far behind the end
        refresh_s=0.5,
    )

    def newest_seen() -> bool:
        rows, _ = view.vehicles(time.time_ns() // 1_000_000, limit=1000)
        return bool(rows) and max(r["seq"] for r in rows) == rounds - 1

    for _ in running(tail):
        wait_for(lambda: tail.skips > 0 and newest_seen())
    # Each cycle read at most its budget (1,000 records); the backlog was jumped over, not read.
    read = tail.records_read
    assert tail.budget() == 1000 and 0 < max(tail.cycles) <= tail.budget(), tail.cycles
    assert read == sum(tail.cycles)
    assert tail.records_skipped > 0 and read + tail.records_skipped <= vehicles * rounds
    assert read < vehicles * rounds / 10
    # Bounded: at most 400 latest readings, 50 histories of 20.
    sizes = view.sizes()
    assert sizes["vehicles"] <= 400 and sizes["with_history"] <= 50
    assert sizes["history_bytes"] <= 50 * (20 * 16 * 8 + 3 * 20 * 8)
