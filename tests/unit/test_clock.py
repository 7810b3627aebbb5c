"""The skew estimator's pure logic (`detectors.clock`) and its scoring against truth
(`streamsim.evaluate.clock`)."""

from __future__ import annotations

import doctest
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import detectors.clock as clock_module
import streamsim.evaluate.clock as clock_eval
from core.contracts import topics
from detectors.clock import (
    CORRECTED,
    OFFSET,
    ClockEstimator,
    ClockParams,
    estimate,
    regime,
    regimes,
)

REPO = Path(__file__).resolve().parents[2]
T0 = 1_767_225_600_000
EPOCH_2000 = 946_684_800_000


def test_doctests() -> None:
    for module in (clock_module, clock_eval):
        assert doctest.testmod(module).failed == 0


def stream(seed: int, devices: int = 4, n: int = 400) -> pd.DataFrame:
    """Readings every second per device, a clock offset of seconds each, lognormal delays,
    some held a minute (an outage's flush), sent in send order."""
    rng = np.random.default_rng(seed)
    rows = []
    for d in range(devices):
        offset = int(rng.uniform(-60_000, 60_000))
        true = T0 + np.arange(n) * 1000 + int(rng.integers(0, 1000))
        delay = np.rint(rng.lognormal(np.log(80), 0.6, n)).astype(np.int64)
        delay[100:160] += 60_000 - (np.arange(60) * 1000)  # held, flushed at true 160 s
        for t, dl in zip(true.tolist(), delay.tolist(), strict=True):
            rows.append((f"dev-{d}", t, t + offset, t + dl, offset))
    frame = pd.DataFrame(
        rows, columns=["entity_id", "true_time", "event_time", "kafka_ts", "clock_offset_ms"]
    )
    return frame.sort_values("kafka_ts", kind="stable").reset_index(drop=True)


def test_the_batch_form_matches_the_per_event_form() -> None:
    frame = stream(7).drop_duplicates("kafka_ts")  # ties: where the two forms may differ
    assert len(frame) > 1_500
    params = ClockParams(window_s=120)
    est = ClockEstimator(params)
    expected = [
        est.update(r.entity_id, r.event_time, r.kafka_ts) for r in frame.itertuples(index=False)
    ]
    done = estimate(frame, params)
    assert list(zip(done[OFFSET], done[CORRECTED], strict=True)) == expected


def test_corrected_time_is_within_the_smallest_delay_of_true_time() -> None:
    done = estimate(stream(8), ClockParams(window_s=120))
    error = done[CORRECTED] - done["true_time"]
    # an envelope is a lag of the window: corrected - true is that record's delay, never < 0
    assert (error >= 0).all()
    assert (error.abs() <= 1000).mean() > 0.99
    late = done["event_time"].between(done["true_time"].min(), done["true_time"].max())
    assert late.any()
    raw = (done["event_time"] - done["true_time"]).abs()
    assert (raw > 1000).mean() > 0.9  # the clocks really are off


def test_held_records_leave_the_envelope_alone() -> None:
    est = ClockEstimator(ClockParams(window_s=300))
    assert est.update("d", 10_000 + 5_000, 10_080) == (4_920, 10_080)
    # held for a minute: its lag is large, the envelope stays on the live one
    assert est.update("d", 11_000 + 5_000, 71_000) == (4_920, 11_080)


def test_the_window_forgets_old_records() -> None:
    est = ClockEstimator(ClockParams(window_s=10))
    est.update("d", 1_000, 1_010)  # lag 10
    assert est.update("d", 5_000, 5_500)[0] == -10  # lag 500, the envelope still 10
    assert est.update("d", 20_000, 20_500)[0] == -500  # the first is 19 s old: gone


def test_a_reset_clock_is_its_own_regime() -> None:
    est = ClockEstimator()
    assert est.update("d", T0 + 2_000, T0 + 100)[0] == 1_900
    # reset to 2000-01-01: decades away; its own envelope, the steady one is kept
    offset, corrected = est.update("d", EPOCH_2000 + 5_000, T0 + 5_050)
    assert corrected == T0 + 5_050 and offset == EPOCH_2000 + 5_000 - (T0 + 5_050)
    assert est.update("d", T0 + 12_000, T0 + 10_400) == (1_900, T0 + 10_100)  # kept
    assert regimes(np.array([0, 86_400_001, -86_400_001])).tolist() == [0, 1, 1]
    assert regime(-86_400_001) == 1


def test_offsets_gives_each_devices_latest_estimate() -> None:
    est = ClockEstimator()
    est.update("a", 1_000, 900)
    est.update("b", 1_000, 1_020)
    assert est.offsets() == {"a": 100, "b": -20}


def truth(rows: Sequence[tuple[str, int, int, int | None]]) -> pd.DataFrame:
    """(entity, true_time, offset, delay or None for dropped) -> truth records."""
    return pd.DataFrame(
        [
            {
                "event_id": f"e{i}",
                "entity_id": e,
                "true_time": t,
                "event_time": t + off,
                "emit_time": None if dl is None else t + dl,
                "clock_offset_ms": off,
            }
            for i, (e, t, off, dl) in enumerate(rows)
        ]
    )


def test_states_split_reset_settling_and_steady() -> None:
    reset_off = EPOCH_2000 - T0
    rows = [("a", T0 + s * 1000, 3_000, 50) for s in range(10)]
    rows += [("a", T0 + s * 1000, -2_000, 50) for s in range(10, 20)]  # a 5 s jump back
    rows += [("b", T0 + s * 1000, reset_off + s * 0, 50) for s in range(3)]
    t = truth(rows)
    state = clock_eval.states(t, settle_ms=5_000)
    assert state[t["entity_id"] == "b"].eq("reset").all()
    a = state[t["entity_id"] == "a"].tolist()
    assert a == ["steady"] * 10 + ["settling"] * 6 + ["steady"] * 4


def test_the_report_scores_steady_records_and_each_state() -> None:
    rows: list[tuple[str, int, int, int | None]] = [
        ("a", T0 + s * 1000, 3_000, 50) for s in range(30)
    ]
    rows += [("a", T0 + s * 1000, -2_000, 50) for s in range(30, 60)]  # a jump back
    rows += [("c", T0 + s * 1000, 90_000, 40) for s in range(60)]
    rows += [("c", T0 + 61_000, 90_000, None)]  # dropped: never sent, not scored
    block = clock_eval.clock_report(
        truth(rows), {"a": "car", "c": "truck"}, ClockParams(window_s=10)
    )
    assert block["within_1s_share"] == 1.0 and block["p50_ms"] in (40, 50)
    settling = block["by_state"]["settling"]
    assert settling["records"] == 11 and settling["within_1s_share"] < 1
    assert block["records"] == 120 - 11
    assert block["non_reset"]["records"] == 120
    assert block["by_class"]["truck"] == {
        "records": 60,
        "within_1s_share": 1.0,
        "p50_ms": 40,
        "p99_ms": 40,
    }


def test_entity_classes_follow_the_scenarios_blocks() -> None:
    ids = pd.Series([f"veh-{i:06d}" for i in range(10)])
    classes = clock_eval.entity_classes(REPO / "config/scenarios/vehicles.yaml", ids)
    assert classes is not None
    assert [classes[i] for i in ids] == ["car"] * 6 + ["van"] * 3 + ["truck"]
    assert (
        clock_eval.entity_classes(REPO / "config/scenarios/vehicles.yaml", pd.Series(["x"])) is None
    )


@pytest.mark.parametrize("domain", ["sensors", "vehicles"])
def test_each_domain_has_a_compacted_offsets_topic(domain: str) -> None:
    topic = topics.clock_offsets(domain)
    assert topic.name == f"{domain}.clock-offsets" and topic.compacted
    assert topic in topics.TOPICS


def test_the_pipeline_setting_defaults_to_the_devices_time() -> None:
    from pipeline.config import PipelineConfig

    base = {"job": "sensors", "input_topics": ["sensors.readings"], "output_topic": "x"}
    assert PipelineConfig.model_validate(base).clock.time == "event_time"
    picked = PipelineConfig.model_validate(
        {**base, "clock": {"time": "corrected_event_time", "params": {"window_s": 120}}}
    )
    assert picked.clock.corrected and picked.clock.params.window_s == 120
    with pytest.raises(ValueError, match="clock"):
        PipelineConfig.model_validate({**base, "clock": {"time": "kafka_time"}})
