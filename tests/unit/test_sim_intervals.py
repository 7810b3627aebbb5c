"""Per-entity episodes (outages, faults): exact classification and the stationary share."""

from __future__ import annotations

import numpy as np

from simulators.distributions import Constant, Exponential
from simulators.intervals import IntervalSchedule
from simulators.records import NO_ID

START = 1_767_225_600_000


def schedule(n: int, rate: float, duration: object, seed: int = 3) -> IntervalSchedule:
    return IntervalSchedule(
        np.full(n, rate),
        np.zeros(n, dtype=np.int16),
        [duration],
        np.random.default_rng(seed),
        START,
    )


def test_classification_matches_a_brute_force_over_every_interval_drawn() -> None:
    s = schedule(40, rate=60.0, duration=Exponential(mean=20.0))
    drawn: list[tuple[int, float, float, int]] = [
        (e, s.start[e], s.end[e], int(s.id[e])) for e in range(40)
    ]
    advance = s._advance

    def recording(ents: np.ndarray) -> None:
        advance(ents)
        drawn.extend((int(e), s.start[e], s.end[e], int(s.id[e])) for e in ents)

    s._advance = recording  # type: ignore[method-assign]
    t = START + np.arange(0, 300_000, 700)
    ent = np.repeat(np.arange(40), t.size)
    times = np.tile(t, 40)
    order = np.argsort(times, kind="stable")
    ids = np.empty(times.size, dtype=np.int64)
    for chunk in np.array_split(order, 37):  # several calls, forward in time
        ids[chunk] = s.classify(ent[chunk], times[chunk]).id
    expected = np.full(times.size, NO_ID)
    for e, lo, hi, i in drawn:
        expected[(ent == e) & (times >= lo) & (times < hi)] = i
    assert (ids != NO_ID).any() and (ids == NO_ID).any()
    assert (ids == expected).all()


def test_share_of_time_inside_matches_the_renewal_formula() -> None:
    rate_per_hour, mean_s = 30.0, 30.0
    s = schedule(2000, rate=rate_per_hour, duration=Exponential(mean=mean_s))
    t = START + np.arange(0, 600_000, 5000)
    ent = np.repeat(np.arange(2000), t.size)
    times = np.tile(t, 2000)
    order = np.argsort(times, kind="stable")
    ids = np.empty(times.size, dtype=np.int64)
    ids[order] = s.classify(ent[order], times[order]).id
    expected = (rate_per_hour / 3600 * mean_s) / (1 + rate_per_hour / 3600 * mean_s)
    assert abs((ids != NO_ID).mean() - expected) < 0.01


def test_zero_rate_never_fires() -> None:
    s = schedule(10, rate=0.0, duration=Constant(value=5.0))
    ep = s.classify(np.arange(10), np.full(10, START + 1000))
    assert (ep.id == NO_ID).all()
