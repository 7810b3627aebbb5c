"""Load-test figures keep shed requests (429) apart from errors and from the accepted
requests' latency."""

from __future__ import annotations

import numpy as np

from streamsim.loadtest.recorder import ERROR, GOOD, SHED, Recorder


def test_a_429_is_shed_not_an_error_and_not_in_the_latency() -> None:
    times = np.array([0.0, 1.0, 1.1, 1.2, 1.3])
    rec = Recorder(times, np.array([False, False, False, False, True]), warmup_s=0.5)
    rec.answered(0, 429, 0.01)  # warm-up: tracked, not counted
    rec.answered(1, 200, 1.002)
    rec.answered(2, 429, 1.1005)
    rec.answered(3, 503, 1.4)
    rec.answered(4, 429, 1.301)  # an invalid body must get a 422: a 429 is an error there
    assert list(rec.outcome) == [SHED, GOOD, SHED, ERROR, ERROR]
    assert rec.shed == 1
    assert rec.errors == {"status_503": 1, "status_429": 1}
    assert rec.histogram.get_total_count() == 3  # 200, 503 and the invalid body's 429
    assert rec.shed_latency.get_total_count() == 1
    assert rec.shed_latency_ms()["p50"] == 0.5
    assert rec.statuses == {200: 1, 429: 2, 503: 1}
