"""Pacing with an injected clock: speed factors, rate caps and rate shapes, no real sleeping."""

from __future__ import annotations

import numpy as np
import pytest

from simulators.pacing import MAX_CHUNK, Pacer
from simulators.settings import ConstantRate, RampRate, SineRate, SpikeRate

START = 1_767_225_600_000


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds > 0
        self.now += seconds
        self.slept += seconds


def pacer(clock: FakeClock, **kwargs: object) -> Pacer:
    return Pacer(start_ms=START, clock=clock, sleep=clock.sleep, **kwargs)  # type: ignore[arg-type]


def sends_at(clock: FakeClock, p: Pacer, emit_ms: np.ndarray) -> list[tuple[float, int]]:
    """(wall seconds since start, rows) for each chunk the pacer releases."""
    t0 = clock.now
    return [(clock.now - t0, s.stop - s.start) for s in p.chunks(emit_ms)]


def test_max_speed_never_sleeps_and_chunks_large_batches() -> None:
    clock = FakeClock()
    chunks = sends_at(clock, pacer(clock, speed=None), START + np.arange(12_000))
    assert clock.slept == 0
    assert [n for _, n in chunks] == [MAX_CHUNK, MAX_CHUNK, 12_000 - 2 * MAX_CHUNK]


def test_speed_maps_emit_time_to_wall_time() -> None:
    clock = FakeClock()
    emit = START + np.array([0, 1_000, 1_001, 20_000])
    chunks = sends_at(clock, pacer(clock, speed=10.0), emit)
    assert [when for when, _ in chunks] == pytest.approx([0.0, 0.1, 2.0])
    assert [n for _, n in chunks] == [1, 2, 1]  # 1000 and 1001 fall in one 10 ms slot


def test_a_late_sink_is_not_made_to_catch_up_by_skipping() -> None:
    clock = FakeClock()
    p = pacer(clock, speed=1.0)
    clock.now += 50  # we fell 50 s behind
    chunks = sends_at(clock, p, START + np.array([1_000, 2_000]))
    assert [n for _, n in chunks] == [1, 1] and clock.slept == 0


def test_rate_cap_spaces_chunks() -> None:
    clock = FakeClock()
    chunks = sends_at(clock, pacer(clock, speed=None, max_rate=1000.0), START + np.zeros(5000))
    assert sum(n for _, n in chunks) == 5000
    assert max(n for _, n in chunks) == 10  # 10 ms worth at 1000/s
    assert chunks[-1][0] == pytest.approx(4.99, abs=0.02)  # 5000 events at 1000/s


def test_shape_limits_the_rate_over_wall_time() -> None:
    clock = FakeClock()
    spike = SpikeRate(rate=100, spike_rate=1000, at_s=1.0, for_s=1.0)
    chunks = sends_at(clock, pacer(clock, speed=None, shape=spike), START + np.zeros(1200))
    before = sum(n for t, n in chunks if t < 1.0)
    during = sum(n for t, n in chunks if 1.0 <= t < 2.0)
    assert 90 <= before <= 110 and 900 <= during <= 1010


def test_the_stricter_of_speed_and_rate_wins() -> None:
    clock = FakeClock()
    emit = START + np.arange(0, 10_000, 10)  # 1000 events over 10 simulated seconds
    chunks = sends_at(clock, pacer(clock, speed=100.0, max_rate=200.0), emit)
    assert chunks[-1][0] == pytest.approx(5.0, abs=0.05)  # the rate (200/s) is stricter


def test_rate_shapes() -> None:
    assert ConstantRate(rate=5).at(123) == 5
    ramp = RampRate(from_rate=10, to_rate=110, over_s=10)
    assert [ramp.at(t) for t in (0, 5, 10, 99)] == [10, 60, 110, 110]
    sine = SineRate(rate=100, amplitude=50, period_s=4)
    assert [round(sine.at(t)) for t in (0, 1, 2, 3)] == [100, 150, 100, 50]
    spike = SpikeRate(rate=1, spike_rate=9, at_s=2, for_s=1)
    assert [spike.at(t) for t in (1.9, 2.0, 2.9, 3.0)] == [1, 9, 9, 1]
