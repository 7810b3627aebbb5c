"""`drain`: a Kafka target's run ends once the job caught up and its alerts settled."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, cast

from streamsim.loadtest.config import LagSettings
from streamsim.loadtest.kafka_target import drain


@dataclass
class Monitor:
    lag_zero_after_s: float
    recovered_after_s: float = 0.0  # below `recovered_at`, not yet 0
    t0: float = field(default_factory=time.perf_counter)

    def recovered(self, recovered_at: int | None) -> bool:
        return time.perf_counter() - self.t0 >= min(self.recovered_after_s, self.lag_zero_after_s)

    def at_zero(self) -> bool:
        return time.perf_counter() - self.t0 >= self.lag_zero_after_s


@dataclass
class Tracer:
    alert_after_s: float | None
    t0: float = field(default_factory=time.perf_counter)

    @property
    def alerts(self) -> list[int]:
        late = self.alert_after_s is None or time.perf_counter() - self.t0 < self.alert_after_s
        return [] if late else [1]

    def quiet_since(self, since: float) -> float:
        last = self.t0 + (self.alert_after_s or 0.0)
        return time.perf_counter() - max(since, last)


def timed(lag: LagSettings, monitor: Monitor | None, tracer: Tracer | None) -> float:
    start = time.perf_counter()
    drain(lag, cast(Any, monitor), cast(Any, tracer))
    return time.perf_counter() - start


LAG = LagSettings(drain_s=3.0, alerts_settle_s=0.5, recovered_at=100)


def test_an_alert_after_the_lag_reached_0_is_waited_for() -> None:
    """The alerts query reports after the others: its alert comes 1.2 s after lag 0."""
    waited = timed(LAG, Monitor(0.2), Tracer(1.2))
    assert 1.2 + 0.5 <= waited < 2.5


def test_alerts_already_in_settle_from_the_lag_reaching_0() -> None:
    assert 0.8 + 0.5 <= timed(LAG, Monitor(0.8), Tracer(0.1)) < 2.0


def test_no_alert_waits_until_the_deadline() -> None:
    assert timed(LAG, Monitor(0.2), Tracer(None)) >= 3.0


def test_without_alerts_traced_a_recovered_lag_ends_the_run_before_0() -> None:
    """`recovered_at` 100: recovered at 0.4 s, 0 only at 2.5 s."""
    assert timed(LAG, Monitor(2.5, recovered_after_s=0.4), None) < 1.0


def test_alerts_settle_only_once_the_lag_is_0() -> None:
    assert timed(LAG, Monitor(1.5, recovered_after_s=0.2), Tracer(0.1)) >= 1.5 + 0.5
