"""`drain`: a Kafka target's run ends once the job caught up and its alerts settled.

A fake clock: `drain` sleeps by moving it on, and the fake lag monitor and alert tracer read
it, so each test asserts why the drain ended and at which (fake) second, never the wall's."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

from streamsim.loadtest.config import LagSettings
from streamsim.loadtest.kafka_target import DRAIN_POLL_S, DrainEnd, drain


@dataclass
class Clock:
    now: float = 0.0
    sleeps: list[float] = field(default_factory=list)

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@dataclass
class Monitor:
    clock: Clock
    lag_zero_after_s: float
    recovered_after_s: float = 0.0  # below `recovered_at`, not yet 0

    def recovered(self, recovered_at: int | None) -> bool:
        return self.clock.now >= min(self.recovered_after_s, self.lag_zero_after_s)

    def at_zero(self) -> bool:
        return self.clock.now >= self.lag_zero_after_s


@dataclass
class Tracer:
    clock: Clock
    alert_after_s: float | None

    @property
    def alerts(self) -> list[int]:
        late = self.alert_after_s is None or self.clock.now < self.alert_after_s
        return [] if late else [1]

    def quiet_since(self, since: float) -> float:
        return self.clock.now - max(since, self.alert_after_s or 0.0)


def drained(clock: Clock, monitor: Monitor | None, tracer: Tracer | None) -> DrainEnd:
    return drain(LAG, cast(Any, monitor), cast(Any, tracer), clock=clock, sleep=clock.sleep)


#: The events below fall between two looks (every 0.2 s), so float sums never decide a look.
LAG = LagSettings(drain_s=3.1, alerts_settle_s=0.5, recovered_at=100)
SETTLE = LAG.alerts_settle_s


def test_an_alert_after_the_lag_reached_0_is_waited_for() -> None:
    """The alerts query reports after the others: its alert comes 1 s after lag 0."""
    clock = Clock()
    assert drained(clock, Monitor(clock, 0.25), Tracer(clock, 1.25)) == "settled"
    assert 1.25 + SETTLE <= clock.now < 1.25 + SETTLE + DRAIN_POLL_S


def test_alerts_already_in_settle_from_the_lag_reaching_0() -> None:
    clock = Clock()
    assert drained(clock, Monitor(clock, 0.85), Tracer(clock, 0.15)) == "settled"
    # lag 0 is seen at the first look after 0.85 s; the settling counts from that look
    assert 0.85 + SETTLE <= clock.now < 0.85 + DRAIN_POLL_S + SETTLE + DRAIN_POLL_S


def test_no_alert_waits_until_the_deadline() -> None:
    clock = Clock()
    assert drained(clock, Monitor(clock, 0.25), Tracer(clock, None)) == "deadline"
    assert LAG.drain_s <= clock.now < LAG.drain_s + DRAIN_POLL_S


def test_without_alerts_traced_a_recovered_lag_ends_the_run_before_0() -> None:
    """`recovered_at` 100: recovered at 0.45 s, 0 only at 2.5 s."""
    clock = Clock()
    assert drained(clock, Monitor(clock, 2.55, recovered_after_s=0.45), None) == "recovered"
    assert 0.45 <= clock.now < 0.45 + DRAIN_POLL_S


def test_alerts_settle_only_once_the_lag_is_0() -> None:
    clock = Clock()
    monitor = Monitor(clock, 1.55, recovered_after_s=0.25)
    assert drained(clock, monitor, Tracer(clock, 0.15)) == "settled"
    assert 1.55 + SETTLE <= clock.now < 1.55 + DRAIN_POLL_S + SETTLE + DRAIN_POLL_S


def test_without_a_job_alerts_settle_from_the_first_look() -> None:
    """No lag monitor: caught up from the first look, at 0 s on this clock."""
    clock = Clock()
    assert drained(clock, None, Tracer(clock, 0.15)) == "settled"
    assert 0.15 + SETTLE <= clock.now < 0.15 + SETTLE + DRAIN_POLL_S


def test_with_nothing_to_watch_it_returns_at_once() -> None:
    clock = Clock()
    assert drained(clock, None, None) == "unwatched"
    assert clock.sleeps == []
