"""The Kafka publisher's counters with delivery reports for failures only."""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any

import pytest

import api.fraud.publisher as publisher_module
from api.fraud.publisher import KafkaPublisher
from core.config import StackConfig


def unreachable_stack() -> StackConfig:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return StackConfig.model_validate({"kafka": {"bootstrap": f"127.0.0.1:{port}"}})


def test_failed_deliveries_are_counted_and_never_delivered(monkeypatch: pytest.MonkeyPatch) -> None:
    real = publisher_module.producer_config

    def quick_timeout(stack: StackConfig, **overrides: Any) -> dict[str, Any]:
        return {**real(stack, **overrides), "message.timeout.ms": 300}

    monkeypatch.setattr(publisher_module, "producer_config", quick_timeout)
    publisher = KafkaPublisher(unreachable_stack(), "cards.activity")
    for i in range(3):
        publisher.publish("tok", b"{}", f"t{i}")
    counters = publisher.counters()
    assert (counters["sent"], counters["delivered"], counters["failed"]) == (3, 0, 0)
    assert counters["queued"] >= 3
    publisher.start()
    deadline = time.monotonic() + 10
    while publisher.failed < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    counters = publisher.counters()
    assert (counters["sent"], counters["delivered"], counters["failed"]) == (3, 0, 3)
    assert counters["last_error"]
    assert publisher.close(1.0) == 0
    assert publisher.delivered == 0


def test_records_left_at_shutdown_are_failed_not_delivered() -> None:
    publisher = KafkaPublisher(unreachable_stack(), "cards.activity")
    publisher.start()
    publisher.publish("tok", b"{}", "t1")
    assert publisher.close(0.2) == 1
    counters = publisher.counters()
    assert (counters["sent"], counters["delivered"], counters["failed"]) == (1, 0, 1)


def test_on_an_event_loop_failed_deliveries_are_served_without_a_poll_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = publisher_module.producer_config

    def quick_timeout(stack: StackConfig, **overrides: Any) -> dict[str, Any]:
        return {**real(stack, **overrides), "message.timeout.ms": 300}

    monkeypatch.setattr(publisher_module, "producer_config", quick_timeout)
    publisher = KafkaPublisher(unreachable_stack(), "cards.activity")

    async def run() -> dict[str, Any]:
        publisher.start(asyncio.get_running_loop())
        for i in range(3):
            publisher.publish("tok", b"{}", f"t{i}")
        deadline = time.monotonic() + 10
        while publisher.failed < 3 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)  # the loop serves librdkafka's callbacks meanwhile
        return publisher.counters()

    counters = asyncio.run(run())
    assert not publisher._thread.is_alive() and publisher._thread.ident is None  # never started
    assert (counters["sent"], counters["delivered"], counters["failed"]) == (3, 0, 3)
    assert counters["last_error"]
    assert publisher.close(1.0) == 0
