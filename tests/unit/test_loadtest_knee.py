"""The step test's knee: per step p99 from the intended send time, the highest rate that holds."""

from __future__ import annotations

import numpy as np

from streamsim.loadtest.recorder import Recorder
from streamsim.loadtest.report import step_table
from streamsim.loadtest.shapes import ConstantLoad, StepLoad


def run(
    latencies_ms: list[float], times: list[float], failed: frozenset[int] = frozenset()
) -> Recorder:
    rec = Recorder(np.array(times), np.zeros(len(times), dtype=bool), warmup_s=1.0)
    for slot, (t, ms) in enumerate(zip(times, latencies_ms, strict=True)):
        if slot in failed:
            rec.failed(slot, "timeout", t + 10)
        else:
            rec.answered(slot, 200, t + ms / 1000)
    return rec


def test_knee_is_the_highest_step_whose_p99_holds() -> None:
    load = StepLoad.model_validate(
        {"steps": [{"at_s": 0, "rate": 100}, {"at_s": 2, "rate": 200}, {"at_s": 4, "rate": 400}]}
    )
    times = [0.5, 1.5, 1.6, 2.5, 2.6, 3.5, 4.5, 4.6, 5.5]
    lat = [50.0, 1.0, 1.0, 2.0, 2.5, 2.9, 2.0, 9.0, 2.0]  # the slot in the warm-up is ignored
    table = step_table(load, run(lat, times), 1.0, 6.0, 3.0)
    assert table is not None
    assert [s["rate"] for s in table["steps"]] == [100, 200, 400]
    assert [s["requests"] for s in table["steps"]] == [2, 3, 3]
    assert [s["holds"] for s in table["steps"]] == [True, True, False]
    assert table["knee_rate"] == 200
    # An error at a step fails it whatever its latency.
    failing = step_table(load, run(lat, times, failed=frozenset({3})), 1.0, 6.0, 3.0)
    assert failing is not None and failing["knee_rate"] == 100


def test_no_knee_for_other_shapes_or_when_nothing_holds() -> None:
    assert step_table(ConstantLoad(rate=10), run([1.0], [1.5]), 1.0, 2.0, 3.0) is None
    load = StepLoad.model_validate({"steps": [{"at_s": 0, "rate": 100}]})
    table = step_table(load, run([5.0, 6.0], [1.2, 1.4]), 1.0, 2.0, 3.0)
    assert table is not None and table["knee_rate"] is None
